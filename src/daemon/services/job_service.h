// JobService: researchers' and CI's API (submit, inspect, cancel, watch, logs).
#pragma once

#include "src/daemon/services/api_guard.h"
#include "src/daemon/services/job_streams.h"
#include "src/daemon/services/leader_gate.h"

#include "hetpool/v1/job.grpc.pb.h"
#include "src/daemon/logs/log_filter.h"
#include "src/daemon/logs/log_store.h"
#include "src/daemon/planning/model_planner.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

// WatchJob and GetJobLogs are served by gRPC's callback API (job_streams.h: no thread per
// stream); the rest by the synchronous one.
class JobServiceImpl final
    : public hetpool::v1::JobService::WithCallbackMethod_WatchJob<
          hetpool::v1::JobService::WithCallbackMethod_GetJobLogs<hetpool::v1::JobService::Service>> {
 public:
  // The hubs the streams run on (started by the daemon, which stops them before the server).
  struct Streams {
    std::shared_ptr<JobStreams<pb::WatchJobResponse>> watches;
    std::shared_ptr<JobStreams<pb::LogChunk>> logs;
  };
  JobServiceImpl(ClusterState* state, const LogStore* logs, const ModelPlanner* planner, const LeaderGate* gate,
                 const ApiGuard* guard, Streams streams)
      : state_(state), logs_(logs), planner_(planner), gate_(gate), guard_(guard), streams_(std::move(streams)) {}

  grpc::Status SubmitJob(grpc::ServerContext* ctx, const pb::SubmitJobRequest* req,
                         pb::SubmitJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const pb::GetJobRequest* req, pb::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const pb::ListJobsRequest* req, pb::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const pb::CancelJobRequest* req, pb::Job* resp) override;
  grpc::ServerWriteReactor<pb::WatchJobResponse>* WatchJob(grpc::CallbackServerContext* ctx,
                                                           const pb::WatchJobRequest* req) override;
  grpc::ServerWriteReactor<pb::LogChunk>* GetJobLogs(grpc::CallbackServerContext* ctx,
                                                     const pb::GetJobLogsRequest* req) override;
  grpc::Status GetUsage(grpc::ServerContext* ctx, const pb::UsageRequest* req, pb::UsageResponse* resp) override;

 private:
  // The job, if the caller may take `action` on it (NOT_FOUND / PERMISSION_DENIED otherwise).
  absl::StatusOr<pb::Job> JobFor(const Caller& caller, Action action, const std::string& id) const;

  ClusterState* state_;
  const LogStore* logs_;
  const ModelPlanner* planner_;
  const LeaderGate* gate_;
  const ApiGuard* guard_;
  const Streams streams_;
};

}  // namespace hetpool::daemon
