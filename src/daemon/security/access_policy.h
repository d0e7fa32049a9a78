// Who may do what: the roles, the caller an RPC runs for, and the one table that says which role
// may take which action. Pure functions, no gRPC: the services ask, the tests check every cell.
//
//   viewer    read cluster views and every job's status (not logs), plan
//   user      submit; read, watch, read logs of and cancel their own jobs; cluster views, plan
//   operator  what a user may, on every job; drain and undrain nodes
//   admin     everything, including submitting on behalf of another user
//   agent     (a node certificate, no role) the agent API, for its own node only
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/common/role.h"

namespace hetpool::daemon {

struct Caller {
  std::string user;   // token owner; empty for agents
  std::string group;  // for group quotas; may be empty
  Role role = Role::kViewer;
  std::string node;  // an agent: the node its certificate names
  // hetpoold --insecure: nobody is identified and every call is allowed. The submitted
  // JobSpec.user then stands for the owner (quotas, rate limits), unverified.
  bool unchecked = false;

  bool is_agent() const { return !node.empty(); }
  std::string Describe() const;  // "alice (user)", "node node-a", "anonymous (--insecure)"
};

enum class Action {
  kReadCluster,  // nodes, devices, fingerprint classes
  kPlan,
  kListJobs,
  kReadJob,  // get, watch
  kReadLogs,
  kSubmitJob,
  kCancelJob,
  kDrainNode,  // drain and undrain
  kAgent,      // register, heartbeat, orders, logs push: node certificates only
};

absl::string_view ActionName(Action action);
// Whether the action changes stored state (audited even when it succeeds).
bool IsMutating(Action action);

// PERMISSION_DENIED naming what is missing, or OK. `job_owner`: the user owning the job the action
// is about (kReadJob, kReadLogs, kCancelJob), or nullptr for actions on no particular job.
absl::Status Allow(const Caller& caller, Action action, const std::string* job_owner = nullptr);

// Whether the caller sees every job in lists, or only their own.
bool SeesAllJobs(const Caller& caller);

// The owner a submission is recorded under: the caller, unless an admin (or --insecure) names
// someone. PERMISSION_DENIED when a non-admin names another user.
absl::StatusOr<std::string> SubmissionOwner(const Caller& caller, const std::string& requested_user);

}  // namespace hetpool::daemon
