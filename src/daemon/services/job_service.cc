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
#include "src/daemon/services/job_stream_sources.h"
#include "src/daemon/state/job_table.h"

namespace hetpool::daemon {
namespace {}  // namespace

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
  // A task of an array not released yet is its array's owner's (cancelling it releases it so).
  if (const auto task = ArrayTaskId(id); absl::IsNotFound(job.status()) && task && action == Action::kCancelJob) {
    job = state_->GetJob(task->first);
  }
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

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* ctx, const pb::CancelJobRequest* req, pb::Job* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::JobService, CancelJob, ctx, req, resp);
  return Guarded(*guard_, ctx, "CancelJob", Action::kCancelJob, req->job_id(),
                 [&](const Caller& caller) -> absl::Status {
                   if (auto job = JobFor(caller, Action::kCancelJob, req->job_id()); !job.ok()) return job.status();
                   std::string reason = req->reason();
                   if (!caller.unchecked && reason.size() <= 1024) {
                     reason = reason.empty() ? absl::StrCat("cancelled by ", caller.user)
                                             : absl::StrCat(reason, " (by ", caller.user, ")");
                   }
                   auto job = state_->Cancel(req->job_id(), reason);
                   if (!job.ok()) return job.status();
                   *resp = *std::move(job);
                   return absl::OkStatus();
                 });
}

grpc::ServerWriteReactor<pb::WatchJobResponse>* JobServiceImpl::WatchJob(grpc::CallbackServerContext* ctx,
                                                                         const pb::WatchJobRequest* req) {
  using Watches = JobStreams<pb::WatchJobResponse>;
  if (absl::Status gate = gate_->Check(); !gate.ok()) return Watches::Refused(ToGrpcStatus(gate));
  grpc::ServerWriteReactor<pb::WatchJobResponse>* watch = nullptr;
  const grpc::Status admitted =
      Guarded(*guard_, ctx, "WatchJob", Action::kReadJob, req->job_id(), [&](const Caller& caller) -> absl::Status {
        if (auto job = JobFor(caller, Action::kReadJob, req->job_id()); !job.ok()) return job.status();
        auto place = guard_->Admit(caller, *ctx, /*stream=*/true);
        if (!place.ok()) return place.status();
        watch = streams_.watches->Open(ctx, req->job_id(), WatchSource(caller), *std::move(place));
        return absl::OkStatus();
      });
  if (!admitted.ok()) return Watches::Refused(admitted);
  return watch;
}

grpc::ServerWriteReactor<pb::LogChunk>* JobServiceImpl::GetJobLogs(grpc::CallbackServerContext* ctx,
                                                                   const pb::GetJobLogsRequest* req) {
  using Logs = JobStreams<pb::LogChunk>;
  if (absl::Status gate = gate_->Check(); !gate.ok()) return Logs::Refused(ToGrpcStatus(gate));
  // Reading logs is audited like a change: they can hold what a job printed of its secrets.
  const std::string target =
      absl::StrCat(req->job_id(), req->node().empty() ? "" : " node=", req->node().substr(0, 64),
                   req->has_rank() ? " rank=" : "", req->has_rank() ? absl::StrCat(req->rank()) : "");
  grpc::ServerWriteReactor<pb::LogChunk>* stream = nullptr;
  const grpc::Status admitted = Guarded(
      *guard_, ctx, "GetJobLogs", Action::kReadLogs, target,
      [&](const Caller& caller) -> absl::Status {
        if (auto job = JobFor(caller, Action::kReadLogs, req->job_id()); !job.ok()) return job.status();
        absl::StatusOr<CallLimiter::Ticket> place = CallLimiter::Ticket();
        if (req->follow()) place = guard_->Admit(caller, *ctx, /*stream=*/true);
        if (!place.ok()) return place.status();
        stream = streams_.logs->Open(ctx, req->job_id(), LogSource(logs_, *req), *std::move(place));
        return absl::OkStatus();
      },
      /*audit_success=*/true);
  if (!admitted.ok()) return Logs::Refused(admitted);
  return stream;
}

grpc::Status JobServiceImpl::GetUsage(grpc::ServerContext* ctx, const pb::UsageRequest* req, pb::UsageResponse* resp) {
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
