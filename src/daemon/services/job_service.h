// JobService: researchers' and CI's API (submit, inspect, cancel, watch, logs).
#pragma once

#include "src/daemon/services/api_guard.h"
#include "src/daemon/services/job_watches.h"
#include "src/daemon/services/leader_gate.h"

#include "hetpool/v1/job.grpc.pb.h"
#include "src/daemon/logs/log_filter.h"
#include "src/daemon/logs/log_store.h"
#include "src/daemon/planning/model_planner.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

// WatchJob is served by gRPC's callback API (JobWatches: no thread per watch); the rest by the
// synchronous one.
class JobServiceImpl final : public hetpool::v1::JobService::WithCallbackMethod_WatchJob<hetpool::v1::JobService::Service> {
 public:
  JobServiceImpl(ClusterState* state, const LogStore* logs, const ModelPlanner* planner, const LeaderGate* gate,
                 const ApiGuard* guard, std::shared_ptr<JobWatches> watches)
      : state_(state), logs_(logs), planner_(planner), gate_(gate), guard_(guard), watches_(std::move(watches)) {}

  grpc::Status SubmitJob(grpc::ServerContext* ctx, const pb::SubmitJobRequest* req,
                         pb::SubmitJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const pb::GetJobRequest* req, pb::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const pb::ListJobsRequest* req,
                        pb::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const pb::CancelJobRequest* req,
                         pb::Job* resp) override;
  grpc::ServerWriteReactor<pb::WatchJobResponse>* WatchJob(grpc::CallbackServerContext* ctx,
                                                           const pb::WatchJobRequest* req) override;
  grpc::Status GetJobLogs(grpc::ServerContext* ctx, const pb::GetJobLogsRequest* req,
                          grpc::ServerWriter<pb::LogChunk>* writer) override;
  grpc::Status GetUsage(grpc::ServerContext* ctx, const pb::UsageRequest* req, pb::UsageResponse* resp) override;

 private:
  // The job, if the caller may take `action` on it (NOT_FOUND / PERMISSION_DENIED otherwise).
  absl::StatusOr<pb::Job> JobFor(const Caller& caller, Action action, const std::string& id) const;
  grpc::Status StreamLogs(grpc::ServerContext* ctx, const pb::GetJobLogsRequest* req,
                          grpc::ServerWriter<pb::LogChunk>* writer);

  ClusterState* state_;
  const LogStore* logs_;
  const ModelPlanner* planner_;
  const LeaderGate* gate_;
  const ApiGuard* guard_;
  std::shared_ptr<JobWatches> watches_;
};

}  // namespace hetpool::daemon
