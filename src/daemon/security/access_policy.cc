#include "src/daemon/security/access_policy.h"

#include "absl/strings/str_cat.h"

namespace hetpool::daemon {
namespace {

// The least role an action needs on the caller's own jobs, and on other users' jobs.
struct Need {
  Role own;
  Role others;
};

Need NeedFor(Action action) {
  switch (action) {
    case Action::kReadCluster:
    case Action::kPlan:
    case Action::kListJobs: return {Role::kViewer, Role::kViewer};
    case Action::kReadJob: return {Role::kViewer, Role::kViewer};  // viewers see status; users only their own (below)
    case Action::kReadLogs:
    case Action::kCancelJob: return {Role::kUser, Role::kOperator};
    case Action::kSubmitJob: return {Role::kUser, Role::kAdmin};
    case Action::kDrainNode: return {Role::kOperator, Role::kOperator};
    case Action::kAgent: break;
  }
  return {Role::kAdmin, Role::kAdmin};
}

}  // namespace

std::string Caller::Describe() const {
  if (unchecked) return "anonymous (--insecure)";
  if (is_agent()) return absl::StrCat("node ", node);
  return absl::StrCat(user, " (", RoleName(role), ")");
}

absl::string_view ActionName(Action action) {
  switch (action) {
    case Action::kReadCluster: return "read the cluster";
    case Action::kPlan: return "plan";
    case Action::kListJobs: return "list jobs";
    case Action::kReadJob: return "read";
    case Action::kReadLogs: return "read the logs of";
    case Action::kSubmitJob: return "submit jobs";
    case Action::kCancelJob: return "cancel";
    case Action::kDrainNode: return "drain or undrain nodes";
    case Action::kAgent: return "use the agent API";
  }
  return "?";
}

bool IsMutating(Action action) {
  // Agent calls change state too, but heartbeats and log pushes are far too frequent to audit:
  // the agent service audits registrations itself.
  return action == Action::kSubmitJob || action == Action::kCancelJob || action == Action::kDrainNode;
}

absl::Status Allow(const Caller& caller, Action action, const std::string* job_owner) {
  if (caller.unchecked) return absl::OkStatus();
  if (action == Action::kAgent) {
    if (caller.is_agent()) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat(caller.Describe(), " may not use the agent API: it needs a node certificate (CN=node:NAME)"));
  }
  if (caller.is_agent()) {
    return absl::PermissionDeniedError(absl::StrCat(caller.Describe(), " may not ", ActionName(action),
                                                    ": node certificates serve the agent API only"));
  }
  const Need need = NeedFor(action);
  const bool own = job_owner == nullptr || *job_owner == caller.user;
  Role needed = own ? need.own : need.others;
  // A user reads only their own jobs; a viewer may read (status only) everyone's.
  if (action == Action::kReadJob && !own && caller.role == Role::kUser) needed = Role::kOperator;
  if (caller.role >= needed) return absl::OkStatus();
  const std::string what =
      job_owner == nullptr
          ? std::string(ActionName(action))
          : absl::StrCat(ActionName(action), own ? " their own jobs" : absl::StrCat(" jobs of ", *job_owner));
  return absl::PermissionDeniedError(
      absl::StrCat(caller.Describe(), " may not ", what, ": needs role ", RoleName(needed)));
}

bool SeesAllJobs(const Caller& caller) {
  return caller.unchecked || caller.role == Role::kViewer || caller.role >= Role::kOperator;
}

absl::StatusOr<std::string> SubmissionOwner(const Caller& caller, const std::string& requested_user) {
  if (caller.unchecked) {
    // Nobody is identified: the spec must say whose job it is (hetpoolctl fills in $USER).
    if (requested_user.empty()) {
      return absl::InvalidArgumentError(
          "user: required by a daemon without authentication (--insecure), which cannot tell who you are; "
          "with a token the daemon fills it in");
    }
    return requested_user;
  }
  if (requested_user.empty() || requested_user == caller.user) return caller.user;
  if (caller.role == Role::kAdmin) return requested_user;
  return absl::PermissionDeniedError(absl::StrCat(caller.Describe(), " may not submit as ", requested_user,
                                                  ": only an admin submits on behalf of another user"));
}

}  // namespace hetpool::daemon
