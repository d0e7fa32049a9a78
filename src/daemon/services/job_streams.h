// The job streams a user opens, WatchJob and GetJobLogs, without a thread each (issue 60, item 6:
// one user's 8,000 watches held 8,031 daemon threads under the sync server). Each stream is a
// gRPC callback reactor, and one sender thread per hub moves them all: it hears which jobs
// changed (ClusterState::WatchJobs), and every quarter second looks at the streams whose source
// polls (logs grow with no change of the job); for each it reads the job once what it shows is on
// disk (ApiGuard::Durable) and asks the stream's source what to send (JobStreamSource). Every half
// second it ends the streams whose bearer token was revoked or expired. Built as OrderStreams (the
// agents' orders streams) is, on callback_streams.h.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "hetpool/v1/job.pb.h"
#include "src/daemon/security/call_limiter.h"
#include "src/daemon/services/api_guard.h"
#include "src/daemon/services/callback_streams.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

// What one stream sends as its job changes. Called by the hub's sender thread only.
template <typename Message>
class JobStreamSource {
 public:
  virtual ~JobStreamSource() = default;
  struct Batch {
    std::vector<Message> messages;
    bool last = false;  // the stream ends (OK) once these are sent
    bool more = false;  // more is there now: ask again as soon as these are sent
  };
  // What to send now that the job is `job`, at change counter `version`.
  virtual absl::StatusOr<Batch> Next(const hetpool::v1::Job& job, uint64_t version) = 0;
  // Whether to be asked on every look, not only when the job changed.
  virtual bool polls() const = 0;
};

template <typename Message>
class JobStreams : public std::enable_shared_from_this<JobStreams<Message>> {
 public:
  // Hears `state`'s job changes (beside any other hub) and starts the sender. `state` and
  // `guard` outlive Stop().
  static std::shared_ptr<JobStreams> Start(ClusterState* state, const ApiGuard* guard);
  ~JobStreams();
  JobStreams(const JobStreams&) = delete;
  JobStreams& operator=(const JobStreams&) = delete;

  // A stream of `job_id` fed by `source`, for a caller allowed to read it (checked by the caller
  // of Open). It holds `place` (CallLimiter) until gRPC is done with it.
  grpc::ServerWriteReactor<Message>* Open(grpc::CallbackServerContext* ctx, const std::string& job_id,
                                          std::unique_ptr<JobStreamSource<Message>> source, CallLimiter::Ticket place);
  // Ends every stream with UNAVAILABLE and stops the sender; streams live on until gRPC is done.
  void Stop();
  // A stream that ends at once with `status`.
  static grpc::ServerWriteReactor<Message>* Refused(const grpc::Status& status) {
    return new RefusedStream<Message>(status);
  }

  size_t open_streams() const;

 private:
  class Stream;
  friend class HubStream<Stream, JobStreams, Message>;
  using Step = StreamStep<Stream, Message>;

  JobStreams(ClusterState* state, const ApiGuard* guard) : state_(state), guard_(guard) {}
  void JobChanged(const std::string& job_id);
  void SendLoop();
  // Each stream's next step, from its job and its source.
  std::vector<Step> Look(const std::vector<std::shared_ptr<Stream>>& batch, bool check_tokens);
  std::optional<Step> AfterWrite(Stream& stream, bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ClusterState* const state_;
  const ApiGuard* const guard_;
  mutable absl::Mutex mu_;
  StreamsByKey<Stream> streams_ ABSL_GUARDED_BY(mu_);   // by job
  std::set<std::string> changed_ ABSL_GUARDED_BY(mu_);  // jobs whose streams the sender looks at
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
  int listener_ = 0;  // ClusterState::WatchJobs's number for this hub
};

}  // namespace hetpool::daemon
