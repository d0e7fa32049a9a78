// ClusterState, its jobs: submission (validated, stored, then queued), reads, cancellation and
// the long poll on a job's changes. (cluster_state.h says what the whole class is.)
#include "src/daemon/state/cluster_state.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/accounting/usage.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/job_validation.h"
#include "src/daemon/state/pool_queries.h"

namespace hetpool::daemon {

absl::StatusOr<pb::Job> ClusterState::Submit(pb::JobSpec spec, const std::string& request_id, const pb::PlanRow* plan) {
  if (auto s = ValidateAndNormalizeSpec(spec); !s.ok()) return s;
  if (request_id.size() > 128) return absl::InvalidArgumentError("request_id: longer than 128 bytes");
  const scheduler::PlacementRequest placement_request = ToPlacementRequest(spec);
  const RequestKey request{spec.user(), request_id};
  pb::Job job;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
    if (!request_id.empty()) {
      // A retry while the first copy is still being written waits for that write's outcome.
      auto settled = [this, &request]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !jobs_.InFlight(request); };
      mu_.Await(absl::Condition(&settled));
      if (const pb::Job* first = jobs_.ByRequest(request)) {
        // A retry sends the same job; the same key with another job is a client bug to report.
        if (!google::protobuf::util::MessageDifferencer::Equals(first->spec(), spec)) {
          return absl::AlreadyExistsError(
              absl::StrCat("request_id: ", request_id, " was used by ", first->id(), " with a different spec"));
        }
        return *first;  // a retried submission: the first one stands
      }
    }
    // Refuse what no node of the pool could ever run; an empty pool accepts (nodes may come).
    if (!nodes_.empty()) {
      if (absl::Status fits = cycle_.EverFits(placement_request); !fits.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            placement_request.groups.empty() ? "nnodes/devices_per_node/requirements: " : "groups: ", fits.message()));
      }
    }
    if (options_.quotas != nullptr) {
      if (auto s = CheckQuotaAtSubmit(*options_.quotas, nodes_, jobs_, spec); !s.ok()) return s;
    }
    job = jobs_.NewJob(std::move(spec), request_id, plan);
  }
  // Durable before it is acknowledged or visible, written outside the lock so that concurrent
  // submissions share one commit (the store groups them). On failure nothing is kept.
  const absl::Status written = WriteJobTimed(store_, options_.observer, job);
  absl::MutexLock lock(&mu_);
  jobs_.NoteStoreWrite(written);
  if (!written.ok()) {
    jobs_.Abandon(job);
    return absl::UnavailableError(absl::StrCat("job not stored: ", written.message()));
  }
  pb::Job stored = jobs_.Admit(std::move(job));
  cycle_.Submitted(stored.id());
  policy_->NoteSubmitted(placement_request);  // the mix Fgd weighs
  jobs_.ShowArray(stored);
  return stored;
}

absl::StatusOr<pb::Job> ClusterState::GetJob(const std::string& id) const {
  {
    absl::MutexLock lock(&mu_);
    const JobEntry* entry = jobs_.Find(id);
    if (entry != nullptr) return jobs_.Shown(*entry);
  }
  // Past its retention a finished job is in the store's archive (read without the lock).
  auto archived = store_->GetArchivedJob(id);
  if (!archived.ok()) return archived.status();
  if (!*archived) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  return **archived;
}

absl::StatusOr<pb::ListJobsResponse> ClusterState::ListJobs(const pb::ListJobsRequest& request) const {
  absl::MutexLock lock(&mu_);
  return jobs_.List(request);
}

absl::StatusOr<pb::Job> ClusterState::Cancel(const std::string& id, const std::string& reason) {
  if (reason.size() > 1024) return absl::InvalidArgumentError("reason: longer than 1024 bytes");
  absl::MutexLock lock(&mu_);
  const std::string message = reason.empty() ? "cancelled by request" : reason;
  JobEntry* entry = jobs_.Find(id);
  if (entry == nullptr) {
    // A task of an array that has not started yet: released already cancelled.
    auto released = jobs_.ReleaseCancelled(id, message);
    if (!released.ok()) return released.status();
    return (*released)->Copy();
  }
  if (IsTerminal(entry->summary().state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " already ended (", JobStateName(entry->summary().state), ")"));
  }
  // An array: its tasks that run or wait go with it; those not released never start.
  const bool array = entry->job().spec().has_array();
  const std::vector<JobEntry*> tasks = array ? jobs_.LiveTasksOf(id) : std::vector<JobEntry*>{};
  if (auto s = CancelEntry(*entry, message); !s.ok()) return s;
  for (JobEntry* task : tasks) {
    if (auto s = CancelEntry(*task, message); !s.ok()) return s;
  }
  return jobs_.Shown(*entry);
}

absl::Status ClusterState::CancelEntry(JobEntry& entry, const std::string& message) {
  pb::Job next = entry.job();
  next.set_state(pb::JOB_STATE_CANCELLED);
  next.set_reason("Cancelled");
  next.set_message(message);
  *next.mutable_finished_at() = ToProtoTime(Now());
  jobs_.AddEvent(next, "Cancelled", message);
  if (auto s = jobs_.Commit(entry, std::move(next)); !s.ok()) return s;
  reconciler_.ReleaseClaims(entry, "job cancelled");
  return absl::OkStatus();
}

absl::StatusOr<std::pair<pb::Job, uint64_t>> ClusterState::WaitJob(const std::string& id, uint64_t after_version,
                                                                   absl::Duration patience) const {
  absl::MutexLock lock(&mu_);
  // On the monotonic clock, and waited for as a timeout: absl's WaitWithDeadline reads the wall
  // clock, so a step back would stretch the wait by the step.
  const absl::Time deadline = SteadyNow() + patience;
  while (true) {
    const JobEntry* entry = jobs_.Find(id);
    if (entry == nullptr) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
    const absl::Time now = SteadyNow();
    if (entry->version > after_version || stopping_ || now >= deadline) {
      return std::make_pair(jobs_.Shown(*entry), entry->version);
    }
    changed_.WaitWithTimeout(&mu_, deadline - now);
  }
}

std::vector<pb::Job> ClusterState::JobsRunningSince(absl::Time since, const std::string& user) const {
  std::vector<pb::Job> out;
  {
    absl::MutexLock lock(&mu_);
    out = jobs_.RunningSince(since, user);
  }
  // Jobs past their retention that still ended inside the window count too.
  auto archived = store_->ArchivedJobsSince(since);
  if (!archived.ok()) {
    spdlog::error("usage: the archive could not be read; its jobs are left out: {}",
                  std::string(archived.status().message()));
    return out;
  }
  for (pb::Job& job : *archived) {
    if (!job.has_started_at() || (!user.empty() && job.spec().user() != user)) continue;
    out.push_back(std::move(job));
  }
  return out;
}

}  // namespace hetpool::daemon
