// What of a job a caller may see: a job's environment holds its owner's secrets (tokens, keys),
// so other readers (viewers) see the names and not the values. Operators and admins, who may act
// on every job, see them whole. Every answer that carries a job goes through it.
#pragma once

#include "hetpool/v1/job.pb.h"
#include "src/daemon/security/access_policy.h"

namespace hetpool::daemon {

inline void RedactFor(const Caller& caller, hetpool::v1::Job& job) {
  if (caller.unchecked || caller.role >= Role::kOperator || caller.user == job.spec().user()) return;
  constexpr absl::string_view kRedacted = "<redacted>";
  for (auto& [name, value] : *job.mutable_spec()->mutable_env()) value = std::string(kRedacted);
  for (auto& plan : *job.mutable_launch_plan()) {
    for (auto& [name, value] : *plan.mutable_env()) value = std::string(kRedacted);
  }
}

}  // namespace hetpool::daemon
