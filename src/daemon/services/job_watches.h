// WatchJob streams without a thread each (issue 60, item 6: one user's 8,000 watches held 8,031
// daemon threads under the sync server). Each watch is a gRPC callback reactor, and one sender
// thread moves them all: it hears which jobs changed (ClusterState::WatchJobs), writes each of
// their watchers the job as that caller may see it (RedactFor) once the change is on disk
// (ApiGuard::Durable), ends a watch when its job has ended, and every half second ends the
// watches whose bearer token was revoked or expired. Built as OrderStreams (the agents' orders
// streams) is: gRPC's calls are made outside the hub's lock, at most one write is outstanding
// per watch, and Finish is called once.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "hetpool/v1/job.pb.h"
#include "src/daemon/security/call_limiter.h"
#include "src/daemon/services/api_guard.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

class JobWatches : public std::enable_shared_from_this<JobWatches> {
 public:
  // Hears `state`'s job changes and starts the sender. `state` and `guard` outlive Stop().
  static std::shared_ptr<JobWatches> Start(ClusterState* state, const ApiGuard* guard);
  ~JobWatches();
  JobWatches(const JobWatches&) = delete;
  JobWatches& operator=(const JobWatches&) = delete;

  // A watch of `job_id` for `caller`, who may read it (checked by the caller of Open). It sends
  // the job at once, then at each change; it holds `place` (CallLimiter) until gRPC is done.
  grpc::ServerWriteReactor<hetpool::v1::WatchJobResponse>* Open(grpc::CallbackServerContext* ctx, Caller caller,
                                                                 const std::string& job_id, CallLimiter::Ticket place);
  // Ends every watch with UNAVAILABLE and stops the sender; watches live on until gRPC is done.
  void Stop();
  // A watch that ends at once with `status`.
  static grpc::ServerWriteReactor<hetpool::v1::WatchJobResponse>* Refused(const grpc::Status& status);

  size_t open_watches() const;

 private:
  class Watch;
  // What to do to a watch once the lock is released.
  struct Step {
    std::shared_ptr<Watch> watch;
    const hetpool::v1::WatchJobResponse* write = nullptr;  // else finish with `status`
    grpc::Status status;
  };

  JobWatches(ClusterState* state, const ApiGuard* guard) : state_(state), guard_(guard) {}
  void JobChanged(const std::string& job_id);
  void SendLoop();
  // The next step for each watch of `batch`: its job if it changed, or its end.
  std::vector<Step> Look(const std::vector<std::shared_ptr<Watch>>& batch, bool check_tokens);
  std::optional<Step> AfterWrite(Watch& watch, bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<Step> AfterCancel(Watch& watch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<Watch> Forget(Watch* watch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Run(const Step& step);

  ClusterState* const state_;
  const ApiGuard* const guard_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<std::shared_ptr<Watch>>> watches_ ABSL_GUARDED_BY(mu_);  // by job
  std::set<std::string> changed_ ABSL_GUARDED_BY(mu_);  // jobs whose watches the sender looks at
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
};

}  // namespace hetpool::daemon
