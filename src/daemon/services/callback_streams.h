// What the daemon's callback streams share (order_streams: the agents' orders; job_streams:
// WatchJob and GetJobLogs): each stream is a gRPC write reactor held by a hub, which keeps its streams by key (a
// node, a job) under the hub's lock. At most one write is outstanding per stream (`writing`),
// Finish is called once (`finished`), and a finish owed while a write is outstanding waits for
// it (`finish_after_write`). gRPC's calls are made after the lock is released: the hub collects
// them as steps. A Stream type has those three fields and derives from ServerWriteReactor and
// enable_shared_from_this.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace hetpool::daemon {

template <typename Stream, typename Message>
struct StreamStep {
  std::shared_ptr<Stream> stream;
  const Message* write = nullptr;  // else finish with `status`
  grpc::Status status;

  void Run() const {
    if (write != nullptr) {
      stream->StartWrite(write);
    } else {
      stream->Finish(status);
    }
  }
};

template <typename Stream>
using StreamsByKey = std::map<std::string, std::vector<std::shared_ptr<Stream>>>;

// A stream that ends at once with `status` (a refused call).
template <typename Message>
class RefusedStream final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

// Every stream not yet finished ends with `status`: at once (a step for after the lock), or
// after its outstanding write.
template <typename Stream, typename Message>
std::vector<StreamStep<Stream, Message>> FinishAll(StreamsByKey<Stream>& streams, const grpc::Status& status) {
  std::vector<StreamStep<Stream, Message>> steps;
  for (auto& [key, list] : streams) {
    for (auto& stream : list) {
      if (stream->finished) continue;
      if (stream->writing) {
        stream->finish_after_write = status;
      } else {
        stream->finished = true;
        steps.push_back({stream, nullptr, status});
      }
    }
  }
  return steps;
}

// The call was cancelled: the stream finishes with `gone`, now or after its outstanding write
// (which then fails).
template <typename Stream, typename Message>
std::optional<StreamStep<Stream, Message>> FinishCancelled(Stream& stream, const grpc::Status& gone) {
  if (stream.finished) return std::nullopt;
  if (stream.writing) {
    stream.finish_after_write = gone;
    return std::nullopt;
  }
  stream.finished = true;
  return StreamStep<Stream, Message>{stream.shared_from_this(), nullptr, gone};
}

// gRPC is done with `stream`: it leaves the hub. Returns the hub's reference, to be released
// after the hub's lock (it may be the last).
template <typename Stream>
std::shared_ptr<Stream> Forget(StreamsByKey<Stream>& streams, const std::string& key, const Stream* stream) {
  auto it = streams.find(key);
  if (it == streams.end()) return nullptr;
  std::shared_ptr<Stream> found;
  std::erase_if(it->second, [&](const std::shared_ptr<Stream>& held) {
    if (held.get() != stream) return false;
    found = held;
    return true;
  });
  if (it->second.empty()) streams.erase(it);
  return found;
}

// A hub's stream: gRPC's reactions, the same for every hub. A finished write or a cancel asks
// the hub for the next step, under its lock, and runs it after; gRPC's last call takes the
// stream out of the hub. `Hub` has `mu_`, `streams_` (StreamsByKey<Derived>) and
// `AfterWrite(Derived&, bool ok)` (an optional StreamStep), and befriends this class; `Derived`
// says its key in `streams_` (`key()`) and how a cancelled call ends (`Gone()`).
template <typename Derived, typename Hub, typename Message>
class HubStream : public grpc::ServerWriteReactor<Message>, public std::enable_shared_from_this<Derived> {
 public:
  explicit HubStream(std::shared_ptr<Hub> hub) : hub_(std::move(hub)) {}

  void OnWriteDone(bool ok) override {
    std::optional<StreamStep<Derived, Message>> next;
    {
      absl::MutexLock lock(&hub_->mu_);
      next = hub_->AfterWrite(self(), ok);
    }
    if (next) next->Run();
  }

  void OnCancel() override {
    std::optional<StreamStep<Derived, Message>> next;
    {
      absl::MutexLock lock(&hub_->mu_);
      next = FinishCancelled<Derived, Message>(self(), Derived::Gone());
    }
    if (next) next->Run();
  }

  // The hub goes last: this stream may hold the last reference to it, and its lock must be
  // released first; the hub's reference to the stream goes after the lock, then `this` is gone.
  void OnDone() override {
    const std::shared_ptr<Hub> hub = hub_;
    std::shared_ptr<Derived> held;
    {
      absl::MutexLock lock(&hub->mu_);
      held = Forget(hub->streams_, self().key(), &self());
    }
  }

 protected:
  const std::shared_ptr<Hub> hub_;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

template <typename Stream>
size_t CountStreams(const StreamsByKey<Stream>& streams) {
  size_t n = 0;
  for (const auto& [key, list] : streams) n += list.size();
  return n;
}

}  // namespace hetpool::daemon
