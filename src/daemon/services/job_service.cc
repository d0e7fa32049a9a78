#include "src/daemon/services/job_service.h"

#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "src/common/convert.h"
#include "src/common/grpc_status.h"
#include "src/daemon/accounting/usage.h"
#include "src/daemon/logs/log_filter.h"
#include "src/daemon/logs/log_request.h"
#include "src/daemon/services/job_redaction.h"

namespace hetpool::daemon {
namespace {

constexpr size_t kLogChunk = 64 * 1024;
constexpr absl::Duration kPollSlice = absl::Milliseconds(500);

// The marker a reader sees where the stream's size cap rotated bytes away.
std::string RotatedAway(uint64_t bytes) {
  return absl::StrCat("[hetpool: ", bytes, " earlier bytes of this log were rotated away (--log-max-bytes)]\n");
}

}  // namespace

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* ctx, const pb::SubmitJobRequest* req,
                                       pb::SubmitJobResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, SubmitJob, ctx, req, resp);
  std::string target = req->spec().name();  // the job id once there is one
  return Guarded(*guard_, ctx, "SubmitJob", Action::kSubmitJob, target, [&](const Caller& caller) -> absl::Status {
    pb::JobSpec spec = req->spec();
    auto owner = SubmissionOwner(caller, spec.user());
    if (!owner.ok()) return owner.status();
    if (!caller.unchecked) {
      // The group is the token's; on behalf of someone else there is none to vouch for.
      spec.set_group(*owner == caller.user ? caller.group : "");
    }
    spec.set_user(*std::move(owner));
    if (auto s = guard_->submissions().Admit(spec.user()); !s.ok()) return s;
    absl::StatusOr<pb::Job> job;
    if (spec.has_model()) {
      // Submit by model: the plan fixes the devices, the class and the layout variables.
      auto plan = planner_->ResolveJob(spec, state_->PlannerPool());
      if (!plan.ok()) return plan.status();
      job = state_->Submit(std::move(spec), req->request_id(), &*plan);
    } else {
      job = state_->Submit(std::move(spec), req->request_id());
    }
    if (!job.ok()) return job.status();
    target = job->id();
    *resp->mutable_job() = *std::move(job);
    return absl::OkStatus();
  });
}

absl::StatusOr<pb::Job> JobServiceImpl::JobFor(const Caller& caller, Action action, const std::string& id) const {
  auto job = state_->GetJob(id);
  if (!job.ok()) return job.status();
  if (absl::Status s = Allow(caller, action, &job->spec().user()); !s.ok()) return s;
  return job;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* ctx, const pb::GetJobRequest* req, pb::Job* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, GetJob, ctx, req, resp);
  return Guarded(*guard_, ctx, "GetJob", Action::kReadJob, req->job_id(), [&](const Caller& caller) -> absl::Status {
    auto job = JobFor(caller, Action::kReadJob, req->job_id());
    if (!job.ok()) return job.status();
    RedactFor(caller, *job);
    *resp = *std::move(job);
    return absl::OkStatus();
  });
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* ctx, const pb::ListJobsRequest* req,
                                      pb::ListJobsResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, ListJobs, ctx, req, resp);
  return Guarded(*guard_, ctx, "ListJobs", Action::kListJobs, req->user(), [&](const Caller& caller) -> absl::Status {
    pb::ListJobsRequest request = *req;
    if (!SeesAllJobs(caller)) {
      // Users list their own jobs only.
      if (!request.user().empty() && request.user() != caller.user) {
        return absl::PermissionDeniedError(absl::StrCat(caller.Describe(), " may not list the jobs of ", request.user(),
                                                        ": needs role operator or viewer"));
      }
      request.set_user(caller.user);
    }
    auto list = state_->ListJobs(request);
    if (!list.ok()) return list.status();
    for (auto& job : *list->mutable_jobs()) RedactFor(caller, job);
    *resp = *std::move(list);
    return absl::OkStatus();
  });
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* ctx, const pb::CancelJobRequest* req,
                                       pb::Job* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, CancelJob, ctx, req, resp);
  return Guarded(*guard_, ctx, "CancelJob", Action::kCancelJob, req->job_id(), [&](const Caller& caller) -> absl::Status {
    if (auto job = JobFor(caller, Action::kCancelJob, req->job_id()); !job.ok()) return job.status();
    std::string reason = req->reason();
    if (!caller.unchecked && reason.size() <= 1024) {
      reason = reason.empty() ? absl::StrCat("cancelled by ", caller.user) : absl::StrCat(reason, " (by ", caller.user, ")");
    }
    auto job = state_->Cancel(req->job_id(), reason);
    if (!job.ok()) return job.status();
    *resp = *std::move(job);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<pb::WatchJobResponse>* JobServiceImpl::WatchJob(grpc::CallbackServerContext* ctx,
                                                                         const pb::WatchJobRequest* req) {
  if (absl::Status gate = gate_->Check(); !gate.ok()) return JobWatches::Refused(ToGrpcStatus(gate));
  grpc::ServerWriteReactor<pb::WatchJobResponse>* watch = nullptr;
  const grpc::Status admitted =
      Guarded(*guard_, ctx, "WatchJob", Action::kReadJob, req->job_id(), [&](const Caller& caller) -> absl::Status {
        if (auto job = JobFor(caller, Action::kReadJob, req->job_id()); !job.ok()) return job.status();
        auto place = guard_->Admit(caller, *ctx, /*stream=*/true);
        if (!place.ok()) return place.status();
        watch = watches_->Open(ctx, caller, req->job_id(), *std::move(place));
        return absl::OkStatus();
      });
  if (!admitted.ok()) return JobWatches::Refused(admitted);
  return watch;
}

grpc::Status JobServiceImpl::GetJobLogs(grpc::ServerContext* ctx, const pb::GetJobLogsRequest* req,
                                        grpc::ServerWriter<pb::LogChunk>* writer) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  // Reading logs is audited like a change: they can hold what a job printed of its secrets.
  const std::string target = absl::StrCat(req->job_id(), req->node().empty() ? "" : " node=",
                                          req->node().substr(0, 64), req->has_rank() ? " rank=" : "",
                                          req->has_rank() ? absl::StrCat(req->rank()) : "");
  return Guarded(
      *guard_, ctx, "GetJobLogs", Action::kReadLogs, target,
      [&](const Caller& caller) -> absl::Status {
        if (auto job = JobFor(caller, Action::kReadLogs, req->job_id()); !job.ok()) return job.status();
        absl::StatusOr<CallLimiter::Ticket> stream = CallLimiter::Ticket();
        if (req->follow()) stream = guard_->Admit(caller, *ctx, /*stream=*/true);
        if (!stream.ok()) return stream.status();
        return FromGrpcStatus(StreamLogs(ctx, req, writer));
      },
      /*audit_success=*/true);
}

grpc::Status JobServiceImpl::StreamLogs(grpc::ServerContext* ctx, const pb::GetJobLogsRequest* req,
                                        grpc::ServerWriter<pb::LogChunk>* writer) {
  uint64_t seen = 0;
  std::map<std::string, uint64_t> offsets;
  std::map<std::string, LogFilter> filters;
  bool final_pass = false;
  while (!ctx->IsCancelled()) {
    if (absl::Status still = guard_->StillAuthenticated(*ctx); !still.ok()) return ToGrpcStatus(still);
    auto next = state_->WaitJob(req->job_id(), seen, seen ? kPollSlice : absl::ZeroDuration());
    if (!next.ok()) return ToGrpcStatus(next.status());
    const pb::Job& job = next->first;
    seen = next->second;
    const uint64_t generation = req->generation() ? req->generation() : job.generation();
    if (generation > job.generation()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job ", job.id(), " has no generation ", generation));
    }
    auto streams = LogStreamsFor(job, *req, generation);
    if (!streams.ok()) return ToGrpcStatus(streams.status());
    if (generation > 0) {
      for (const auto& [node, local_rank] : *streams) {
        std::optional<LogLabels> labels;
        if (!req->raw()) labels = LogLabels{node, GlobalRanksOn(job, generation, node)};
        auto filter = filters.try_emplace(node, local_rank, kMaxLogLine, labels).first;
        if (labels) filter->second.SetGlobalRanks(labels->global_ranks);  // known once the workers are up
        while (true) {
          auto slice = logs_->Read(job.id(), generation, node, offsets[node], kLogChunk);
          if (!slice.ok()) return ToGrpcStatus(slice.status());
          if (!slice->exists && NodeExited(job, generation, node)) {
            // The agent pushes every exited node's log (even an empty one) before its exit counts:
            // a missing one is gone, and saying so beats returning nothing.
            return grpc::Status(grpc::StatusCode::NOT_FOUND,
                                absl::StrCat("the log of ", job.id(), " generation ", generation, " on node ", node,
                                             " is not in this hetpoold's log store: it was written before a failover "
                                             "to a replica that does not share --logs-dir, or it was removed"));
          }
          if (slice->data.empty() && slice->dropped == 0) break;
          offsets[node] += slice->dropped + slice->data.size();
          pb::LogChunk chunk;
          chunk.set_node(node);
          if (slice->dropped > 0) chunk.set_data(RotatedAway(slice->dropped));
          chunk.mutable_data()->append(filter->second.Feed(slice->data));
          if (!chunk.data().empty() && !writer->Write(chunk)) return grpc::Status::CANCELLED;
        }
      }
    }
    // Agents push a node's logs before reporting its exit, so one pass after the job ended
    // returns everything.
    const bool ended = IsTerminal(job.state()) || (req->generation() && req->generation() < job.generation());
    if (!req->follow() || final_pass) break;
    if (ended) final_pass = true;
    if (state_->stopping()) break;
  }
  // A last line without a newline is still held back for its label: it ends here.
  for (auto& [node, filter] : filters) {
    pb::LogChunk chunk;
    chunk.set_node(node);
    chunk.set_data(filter.Finish());
    if (!chunk.data().empty() && !writer->Write(chunk)) return grpc::Status::CANCELLED;
  }
  return ctx->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetUsage(grpc::ServerContext* ctx, const pb::UsageRequest* req,
                                      pb::UsageResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, GetUsage, ctx, req, resp);
  return Guarded(*guard_, ctx, "GetUsage", Action::kListJobs, req->by(), [&](const Caller& caller) -> absl::Status {
    UsageWindow window;
    window.until = req->has_until() ? FromProtoTime(req->until()) : absl::Now();
    window.since = req->has_since() ? FromProtoTime(req->since()) : window.until - absl::Hours(7 * 24);
    // Users account for their own jobs; viewers (finance), operators and admins for everyone's.
    const std::string only = SeesAllJobs(caller) ? "" : caller.user;
    auto usage = ComputeUsage(state_->JobsRunningSince(window.since, only), window, req->by(), planner_->prices());
    if (!usage.ok()) return usage.status();
    *resp = *std::move(usage);
    return absl::OkStatus();
  });
}

}  // namespace hetpool::daemon
