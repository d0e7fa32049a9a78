#include "src/daemon/services/job_streams.h"

#include <utility>

#include "src/common/grpc_status.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

constexpr absl::Duration kLookEvery = absl::Milliseconds(250);        // streams whose source polls
constexpr absl::Duration kTokenCheckEvery = absl::Milliseconds(500);  // every stream's token

grpc::Status HubStopping() { return ToGrpcStatus(absl::UnavailableError("hetpoold is shutting down")); }
grpc::Status ReaderGone() { return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"); }

}  // namespace

// One call. gRPC calls its reactions on its own threads; the fields below are read and written
// under the hub's lock, but for those set at the start and `source`, which only the sender uses.
template <typename Message>
class JobStreams<Message>::Stream final : public HubStream<Stream, JobStreams<Message>, Message> {
 public:
  Stream(std::shared_ptr<JobStreams> hub, std::string job, std::optional<std::string> bearer,
         std::unique_ptr<JobStreamSource<Message>> feed, CallLimiter::Ticket held)
      : HubStream<Stream, JobStreams<Message>, Message>(std::move(hub)),
        job_id(std::move(job)),
        authorization(std::move(bearer)),
        source(std::move(feed)),
        place(std::move(held)) {}
  const std::string& key() const { return job_id; }
  static grpc::Status Gone() { return ReaderGone(); }

  const std::string job_id;
  // The bearer token the call came with, checked again every half second (the context itself
  // is gRPC's, and gone once the call is done).
  const std::optional<std::string> authorization;
  const std::unique_ptr<JobStreamSource<Message>> source;
  const CallLimiter::Ticket place;
  std::deque<Message> pending;  // the front is being written
  bool writing = false;
  bool finished = false;
  bool look_again = false;     // the job changed, or the source has more, while a write was outstanding
  bool end_when_sent = false;  // the source said its last
  std::optional<grpc::Status> finish_after_write;
};

template <typename Message>
std::shared_ptr<JobStreams<Message>> JobStreams<Message>::Start(ClusterState* state, const ApiGuard* guard) {
  std::shared_ptr<JobStreams> hub(new JobStreams(state, guard));
  JobStreams* raw = hub.get();  // the listener is removed by Stop, before the last reference goes
  hub->listener_ = state->WatchJobs([raw](const std::string& job_id) { raw->JobChanged(job_id); });
  hub->sender_ = std::thread([raw] { raw->SendLoop(); });
  return hub;
}

template <typename Message>
JobStreams<Message>::~JobStreams() {
  Stop();
}

template <typename Message>
grpc::ServerWriteReactor<Message>* JobStreams<Message>::Open(grpc::CallbackServerContext* ctx,
                                                             const std::string& job_id,
                                                             std::unique_ptr<JobStreamSource<Message>> source,
                                                             CallLimiter::Ticket place) {
  std::optional<std::string> authorization;
  const auto& metadata = ctx->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string(it->second.data(), it->second.size());
  }
  auto stream = std::make_shared<Stream>(this->shared_from_this(), job_id, std::move(authorization), std::move(source),
                                         std::move(place));
  absl::MutexLock lock(&mu_);
  if (stopping_) return Refused(HubStopping());
  streams_[job_id].push_back(stream);
  changed_.insert(job_id);  // the sender looks at it at once
  return stream.get();
}

template <typename Message>
void JobStreams<Message>::Stop() {
  std::vector<Step> steps;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    steps = FinishAll<Stream, Message>(streams_, HubStopping());
  }
  state_->UnwatchJobs(listener_);  // under the state's lock: no listener call is under way after it
  if (sender_.joinable()) sender_.join();
  for (const Step& step : steps) step.Run();
}

template <typename Message>
size_t JobStreams<Message>::open_streams() const {
  absl::MutexLock lock(&mu_);
  return CountStreams(streams_);
}

template <typename Message>
void JobStreams<Message>::JobChanged(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (streams_.contains(job_id)) changed_.insert(job_id);
}

template <typename Message>
void JobStreams<Message>::SendLoop() {
  absl::Time next_look = MonotonicNow() + kLookEvery;
  absl::Time next_token_check = MonotonicNow() + kTokenCheckEvery;
  while (true) {
    std::vector<std::shared_ptr<Stream>> batch;
    bool check_tokens = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](JobStreams* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 return self->stopping_ || !self->changed_.empty();
                               },
                               this),
                           kLookEvery);
      if (stopping_) return;
      const absl::Time now = MonotonicNow();
      const bool look_all = now >= next_look;
      if (look_all) next_look = now + kLookEvery;
      check_tokens = now >= next_token_check;
      if (check_tokens) next_token_check = now + kTokenCheckEvery;
      for (const auto& [job, streams] : streams_) {
        const bool changed = changed_.contains(job);
        for (const auto& stream : streams) {
          if (stream->finished) continue;
          if (stream->writing) {
            stream->look_again = stream->look_again || changed;
            continue;
          }
          if (changed || check_tokens || (look_all && stream->source->polls())) batch.push_back(stream);
        }
      }
      changed_.clear();
    }
    if (batch.empty()) continue;
    for (const Step& step : Look(batch, check_tokens)) step.Run();
  }
}

template <typename Message>
std::vector<typename JobStreams<Message>::Step> JobStreams<Message>::Look(
    const std::vector<std::shared_ptr<Stream>>& batch, bool check_tokens) {
  // Without the hub's lock: the state's lock, a flush to disk and the sources' reads are taken here.
  std::vector<std::optional<grpc::Status>> ends(batch.size());
  std::vector<typename JobStreamSource<Message>::Batch> sends(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    Stream& stream = *batch[i];
    if (check_tokens && stream.authorization) {
      if (absl::Status still = guard_->StillAuthenticated(*stream.authorization); !still.ok()) {
        ends[i] = ToGrpcStatus(still);
        continue;
      }
    }
    if (state_->stopping()) {
      ends[i] = HubStopping();
      continue;
    }
    auto now = state_->WaitJob(stream.job_id, 0, absl::ZeroDuration());
    // A reader sees only what is on disk, as every answer does (Guarded).
    absl::Status synced = now.ok() ? guard_->Durable(absl::OkStatus()) : now.status();
    if (!synced.ok()) {
      ends[i] = ToGrpcStatus(synced);
      continue;
    }
    auto next = stream.source->Next(now->first, now->second);
    if (!next.ok()) {
      ends[i] = ToGrpcStatus(next.status());
    } else {
      sends[i] = *std::move(next);
    }
  }
  std::vector<Step> steps;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    Stream& stream = *batch[i];
    if (stream.finished || stream.writing) continue;  // cancelled or stopped meanwhile
    if (ends[i]) {
      stream.finished = true;
      steps.push_back({batch[i], nullptr, *ends[i]});
      continue;
    }
    for (Message& message : sends[i].messages) stream.pending.push_back(std::move(message));
    stream.end_when_sent = sends[i].last;
    // A source with more to give is asked again once what it gave is sent, not at the next tick.
    if (sends[i].more) {
      if (stream.pending.empty()) {
        changed_.insert(stream.job_id);
      } else {
        stream.look_again = true;
      }
    }
    if (!stream.pending.empty()) {
      stream.writing = true;
      steps.push_back({batch[i], &stream.pending.front(), grpc::Status::OK});
    } else if (stream.end_when_sent) {
      stream.finished = true;
      steps.push_back({batch[i], nullptr, grpc::Status::OK});
    }
  }
  return steps;
}

template <typename Message>
std::optional<typename JobStreams<Message>::Step> JobStreams<Message>::AfterWrite(Stream& stream, bool ok) {
  std::shared_ptr<Stream> self = stream.shared_from_this();  // the hub holds it until OnDone
  stream.pending.pop_front();
  if (!ok || stream.finish_after_write) {
    stream.writing = false;
    stream.finished = true;
    return Step{self, nullptr, stream.finish_after_write.value_or(ReaderGone())};
  }
  if (!stream.pending.empty()) return Step{self, &stream.pending.front(), grpc::Status::OK};
  stream.writing = false;
  if (stream.end_when_sent) {
    stream.finished = true;
    return Step{self, nullptr, grpc::Status::OK};
  }
  if (stream.look_again) {
    stream.look_again = false;
    changed_.insert(stream.job_id);
  }
  return std::nullopt;
}

template class JobStreams<pb::WatchJobResponse>;
template class JobStreams<pb::LogChunk>;

}  // namespace hetpool::daemon
