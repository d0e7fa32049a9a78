// Validation of a submitted JobSpec and of an agent's registration: every rule names the field it
// checks, so whoever reads INVALID_ARGUMENT knows what to fix. Also fills defaults (procs_per_node).
#pragma once

#include "absl/status/status.h"
#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/job.pb.h"
#include "src/common/names.h"

namespace hetpool::daemon {

// Limits on request fields; oversized input is refused rather than truncated.
struct SpecLimits {
  size_t max_name = 128;
  size_t max_user = kMaxUserName;  // users and groups, as in tokens
  size_t max_labels = 64;
  size_t max_label_key = 63;
  size_t max_label_value = 256;
  size_t max_args = 1024;
  size_t max_arg_bytes = 8192;
  size_t max_env = 256;
  size_t max_env_value = 32768;
  size_t max_path = 4096;
  // The whole spec (argv, env, labels and the rest together): every field can be within its
  // limit and the sum still too large to send a node in its orders (orders_parts.h).
  size_t max_spec_bytes = 256 * 1024;
  int max_nnodes = 1024;
  int max_devices_per_node = 64;
  int max_procs_per_node = 256;
  int max_restarts = 100;
  int max_priority = 1000;
};

// What a job asks of each node's host (JobSpec.host): per process x procs_per_node + per node.
// Bounded by validation (kMaxHostCpuMilli, kMaxHostMemoryMib), so no overflow past it.
inline constexpr int64_t kMaxHostCpuMilli = 1024 * 1000;
inline constexpr uint64_t kMaxHostMemoryMib = uint64_t{64} << 20;
int64_t HostCpuMilliPerNode(const hetpool::v1::JobSpec& spec);
uint64_t HostMemoryMibPerNode(const hetpool::v1::JobSpec& spec);
// Ranks (processes) and cards a job runs on in all: its nodes x per node, or each role group's.
int64_t TotalRanks(const hetpool::v1::JobSpec& spec);
int64_t TotalCards(const hetpool::v1::JobSpec& spec);

// Checks `spec` and fills defaults in place. INVALID_ARGUMENT with "field: problem" on failure.
absl::Status ValidateAndNormalizeSpec(hetpool::v1::JobSpec& spec, const SpecLimits& limits = {});

// Node names become file names and rendezvous ids: 1-63 of [A-Za-z0-9._-], not starting with '.'.
absl::Status ValidateNodeName(const std::string& name);

// An agent's registration: its node name, address, absolute torchrun and work paths, labels.
// The inventory is checked where it is converted (FromProto).
absl::Status ValidateRegistration(const hetpool::v1::RegisterRequest& request);

}  // namespace hetpool::daemon
