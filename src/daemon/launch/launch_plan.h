// Turns a placement into the exact per-node launch: the torchrun argv (rendezvous, ranks, the
// Python 3.11 workaround) and the environment (device visibility, collective backend, hetpool ids).
// Pure function of its inputs, so it is unit-tested per vendor.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetpool/vendor.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool::daemon {

// What the planner needs to know about a node of the placement.
struct LaunchNode {
  std::string name;
  std::string address;        // rendezvous host when this node is rank 0
  std::string torchrun_path;  // as reported by the agent
  std::string work_dir;       // agent's work root (torchrun --log_dir goes below it)
  std::vector<std::string> device_ids;
  std::map<std::string, int> device_index;  // device id -> vendor index on that node
  std::string python_path;                  // the agent's interpreter for direct Python jobs ("": none)
  // A job across vendors: the node's vendor, role group and ranks (its group's procs_per_node).
  Vendor vendor = Vendor::kCpu;
  std::string group;
  int procs = 0;                   // 0: the spec's procs_per_node
  std::vector<int> micro_batches;  // with a global batch: each local rank's share of it
  // Near its placed cards: their local CPUs and NUMA nodes ("0-15,32-47"; "" unknown).
  std::string cpus;
  std::string numa_nodes;
};

struct LaunchInput {
  std::string job_id;
  uint64_t generation = 0;
  int restart_count = 0;
  bool preempted = false;  // the previous generation was preempted: HETPOOL_PREEMPTED=1
  bool resized = false;    // an elastic job's previous generation was resized: HETPOOL_RESIZED=1
  Vendor vendor = Vendor::kCpu;
  int rendezvous_port = 0;
  int32_t device_milli = 1000;  // < 1000: a fractional share of the one device
  uint64_t device_memory_mib = 0;
  // Jobs submitted by model: the planner's layout (HETPOOL_TP, _PP, _DP, _ZERO_STAGE, ...).
  std::vector<std::pair<std::string, std::string>> layout_env;
  std::vector<LaunchNode> nodes;  // in node-rank order
  // A job across vendors (nodes of more than one vendor, or role groups): the collective between
  // groups, chosen for this generation: gloo, hierarchical or flagcx (collective.h).
  std::string collective;
  // A task of a job array: its index (HETPOOL_ARRAY_INDEX; -1: no array) and the array's size.
  int array_index = -1;
  int array_count = 0;
};

absl::StatusOr<std::vector<hetpool::v1::NodeLaunchPlan>> BuildLaunchPlans(const hetpool::v1::JobSpec& spec,
                                                                          const LaunchInput& input);

}  // namespace hetpool::daemon
