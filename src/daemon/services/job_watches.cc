#include "src/daemon/services/job_watches.h"

#include <utility>

#include "src/common/convert.h"
#include "src/common/grpc_status.h"
#include "src/common/monotonic_clock.h"
#include "src/daemon/services/job_redaction.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

constexpr absl::Duration kTokenCheckEvery = absl::Milliseconds(500);

grpc::Status DaemonStopping() { return ToGrpcStatus(absl::UnavailableError("hetpoold is shutting down")); }
grpc::Status WatcherGone() { return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"); }

class RefusedWatch final : public grpc::ServerWriteReactor<pb::WatchJobResponse> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

// One WatchJob call. gRPC calls its reactions on its own threads; the fields below are read and
// written under the hub's lock, but for those set at the start and never changed.
class JobWatches::Watch final : public grpc::ServerWriteReactor<pb::WatchJobResponse>,
                                public std::enable_shared_from_this<Watch> {
 public:
  Watch(std::shared_ptr<JobWatches> hub, Caller who, std::string job, std::optional<std::string> bearer,
        CallLimiter::Ticket held)
      : hub_(std::move(hub)),
        caller(std::move(who)),
        job_id(std::move(job)),
        authorization(std::move(bearer)),
        place(std::move(held)) {}

  void OnWriteDone(bool ok) override {
    std::optional<Step> next;
    {
      absl::MutexLock lock(&hub_->mu_);
      next = hub_->AfterWrite(*this, ok);
    }
    if (next) Run(*next);
  }

  void OnCancel() override {
    std::optional<Step> next;
    {
      absl::MutexLock lock(&hub_->mu_);
      next = hub_->AfterCancel(*this);
    }
    if (next) Run(*next);
  }

  // gRPC's last call: the watch leaves the hub (the hub goes last: this may hold the last
  // reference to it, and its lock must be released first).
  void OnDone() override {
    const std::shared_ptr<JobWatches> hub = hub_;
    std::shared_ptr<Watch> self;
    {
      absl::MutexLock lock(&hub->mu_);
      self = hub->Forget(this);
    }
  }

  const std::shared_ptr<JobWatches> hub_;
  const Caller caller;
  const std::string job_id;
  // The bearer token the call came with, checked again every half second (the context itself
  // is gRPC's, and gone once the call is done).
  const std::optional<std::string> authorization;
  const CallLimiter::Ticket place;
  uint64_t seen_version = 0;
  pb::WatchJobResponse update;  // the one being written
  bool writing = false;
  bool finished = false;
  bool look_again = false;      // the job changed while an update was being written
  bool end_after_write = false;  // the update being written shows the job ended
  std::optional<grpc::Status> finish_after_write;
};

std::shared_ptr<JobWatches> JobWatches::Start(ClusterState* state, const ApiGuard* guard) {
  std::shared_ptr<JobWatches> watches(new JobWatches(state, guard));
  JobWatches* raw = watches.get();  // the listener is removed by Stop, before the last reference goes
  state->WatchJobs([raw](const std::string& job_id) { raw->JobChanged(job_id); });
  watches->sender_ = std::thread([raw] { raw->SendLoop(); });
  return watches;
}

JobWatches::~JobWatches() { Stop(); }

grpc::ServerWriteReactor<pb::WatchJobResponse>* JobWatches::Refused(const grpc::Status& status) {
  return new RefusedWatch(status);
}

grpc::ServerWriteReactor<pb::WatchJobResponse>* JobWatches::Open(grpc::CallbackServerContext* ctx, Caller caller,
                                                                 const std::string& job_id,
                                                                 CallLimiter::Ticket place) {
  std::optional<std::string> authorization;
  const auto& metadata = ctx->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string(it->second.data(), it->second.size());
  }
  auto watch = std::make_shared<Watch>(shared_from_this(), std::move(caller), job_id, std::move(authorization),
                                       std::move(place));
  absl::MutexLock lock(&mu_);
  if (stopping_) return Refused(DaemonStopping());
  watches_[job_id].push_back(watch);
  changed_.insert(job_id);  // the sender sends the job as it is now
  return watch.get();
}

void JobWatches::Stop() {
  std::vector<Step> steps;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [job, watches] : watches_) {
      for (auto& watch : watches) {
        if (watch->finished) continue;
        if (watch->writing) {
          watch->finish_after_write = DaemonStopping();
        } else {
          watch->finished = true;
          steps.push_back({watch, nullptr, DaemonStopping()});
        }
      }
    }
  }
  state_->WatchJobs(nullptr);  // under the state's lock: no listener call is under way after it
  if (sender_.joinable()) sender_.join();
  for (const Step& step : steps) Run(step);
}

size_t JobWatches::open_watches() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [job, watches] : watches_) n += watches.size();
  return n;
}

void JobWatches::JobChanged(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  if (watches_.contains(job_id)) changed_.insert(job_id);
}

void JobWatches::SendLoop() {
  absl::Time next_token_check = MonotonicNow() + kTokenCheckEvery;
  while (true) {
    std::vector<std::shared_ptr<Watch>> batch;
    bool check_tokens = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](JobWatches* self) ABSL_NO_THREAD_SAFETY_ANALYSIS { return self->stopping_ || !self->changed_.empty(); },
              this),
          kTokenCheckEvery);
      if (stopping_) return;
      check_tokens = MonotonicNow() >= next_token_check;
      if (check_tokens) next_token_check = MonotonicNow() + kTokenCheckEvery;
      for (const auto& [job, watches] : watches_) {
        const bool changed = changed_.contains(job);
        if (!changed && !check_tokens) continue;
        for (const auto& watch : watches) {
          if (watch->finished) continue;
          if (watch->writing) {
            watch->look_again = watch->look_again || changed;
            continue;
          }
          batch.push_back(watch);
        }
      }
      changed_.clear();
    }
    if (batch.empty()) continue;
    const std::vector<Step> steps = Look(batch, check_tokens);
    for (const Step& step : steps) Run(step);
  }
}

std::vector<JobWatches::Step> JobWatches::Look(const std::vector<std::shared_ptr<Watch>>& batch, bool check_tokens) {
  // Read without the hub's lock: the state's lock and a flush to disk are taken here.
  std::vector<std::optional<grpc::Status>> ends(batch.size());
  std::vector<std::optional<std::pair<pb::Job, uint64_t>>> jobs(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const Watch& watch = *batch[i];
    if (check_tokens && watch.authorization) {
      if (absl::Status still = guard_->StillAuthenticated(*watch.authorization); !still.ok()) {
        ends[i] = ToGrpcStatus(still);
        continue;
      }
    }
    if (state_->stopping()) {
      ends[i] = DaemonStopping();
      continue;
    }
    auto now = state_->WaitJob(watch.job_id, watch.seen_version, absl::ZeroDuration());
    if (!now.ok()) {
      ends[i] = ToGrpcStatus(now.status());
    } else if (now->second > watch.seen_version) {
      // A watcher sees only what is on disk, as every answer does (Guarded).
      if (absl::Status synced = guard_->Durable(absl::OkStatus()); !synced.ok()) {
        ends[i] = ToGrpcStatus(synced);
      } else {
        jobs[i] = *std::move(now);
      }
    }
  }
  std::vector<Step> steps;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    Watch& watch = *batch[i];
    if (watch.finished || watch.writing) continue;  // cancelled or stopped meanwhile
    if (ends[i]) {
      watch.finished = true;
      steps.push_back({batch[i], nullptr, *ends[i]});
    } else if (jobs[i]) {
      auto& [job, version] = *jobs[i];
      RedactFor(watch.caller, job);
      watch.seen_version = version;
      watch.update.Clear();
      if (job.events_size() > 0) *watch.update.mutable_event() = job.events(job.events_size() - 1);
      watch.end_after_write = IsTerminal(job.state());
      *watch.update.mutable_job() = std::move(job);
      watch.writing = true;
      steps.push_back({batch[i], &watch.update, grpc::Status::OK});
    }
  }
  return steps;
}

std::optional<JobWatches::Step> JobWatches::AfterWrite(Watch& watch, bool ok) {
  std::shared_ptr<Watch> self = watch.shared_from_this();  // the hub holds it until OnDone
  watch.writing = false;
  if (!ok || watch.finish_after_write || watch.end_after_write) {
    watch.finished = true;
    const grpc::Status status =
        watch.finish_after_write ? *watch.finish_after_write : (ok ? grpc::Status::OK : WatcherGone());
    return Step{self, nullptr, status};
  }
  if (watch.look_again) {
    watch.look_again = false;
    changed_.insert(watch.job_id);
  }
  return std::nullopt;
}

std::optional<JobWatches::Step> JobWatches::AfterCancel(Watch& watch) {
  if (watch.finished) return std::nullopt;
  if (watch.writing) {
    watch.finish_after_write = WatcherGone();  // the outstanding write ends first
    return std::nullopt;
  }
  watch.finished = true;
  return Step{watch.shared_from_this(), nullptr, WatcherGone()};
}

std::shared_ptr<JobWatches::Watch> JobWatches::Forget(Watch* watch) {
  auto it = watches_.find(watch->job_id);
  if (it == watches_.end()) return nullptr;
  std::shared_ptr<Watch> found;
  std::erase_if(it->second, [&](const std::shared_ptr<Watch>& held) {
    if (held.get() != watch) return false;
    found = held;
    return true;
  });
  if (it->second.empty()) watches_.erase(it);
  return found;
}

void JobWatches::Run(const Step& step) {
  if (step.write != nullptr) {
    step.watch->StartWrite(step.write);
  } else {
    step.watch->Finish(step.status);
  }
}

}  // namespace hetpool::daemon
