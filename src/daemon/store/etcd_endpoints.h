// The endpoints of an etcd cluster, for everything in hetpoold that talks to etcd (the store,
// leadership): a call goes to the endpoint that last answered and, while endpoints are
// unreachable, on to the next. A member back from an outage is used at once: the channels retry
// a broken connection at least every second (gRPC's default backoff grows to two minutes, and a
// channel waiting it out fails every call at once), and, for the store, when every endpoint
// refuses at once the call waits, within its timeout, for the endpoint that last answered to
// connect again. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "src/common/channel_backoff.h"

namespace hetpool::daemon {

class EtcdEndpoints {
 public:
  // "host:port[,host:port...]". `wait_for_reconnect`: see Call. The store waits; leadership
  // does not (a renewal that fails must fail at once, or the leader learns late that its lease
  // lapsed).
  explicit EtcdEndpoints(const std::string& endpoints, bool wait_for_reconnect = false)
      : wait_for_reconnect_(wait_for_reconnect) {
    for (absl::string_view e : absl::StrSplit(endpoints, ',', absl::SkipWhitespace())) {
      channels_.push_back(
          grpc::CreateCustomChannel(std::string(e), grpc::InsecureChannelCredentials(), ReconnectBackoff()));
    }
  }
  bool empty() const { return channels_.empty(); }

  // Runs call(channel, ctx) with `timeout` per attempt, until an endpoint answers (any status
  // but UNAVAILABLE / DEADLINE_EXCEEDED); returns the last status. With `wait_for_reconnect`,
  // when every endpoint failed at once (UNAVAILABLE, none timed out: refused, or a channel still
  // in reconnect backoff), the call is made once more to the endpoint that last answered,
  // waiting up to `timeout` for it to connect; if it does not, the first round's status is
  // returned.
  template <typename Fn>
  grpc::Status Call(absl::Duration timeout, Fn&& call) {
    size_t first;
    {
      absl::MutexLock lock(&mu_);
      first = current_;
    }
    grpc::Status status(grpc::StatusCode::UNAVAILABLE, "no etcd endpoint");
    bool timed_out = false;
    for (size_t i = 0; i < channels_.size(); ++i) {
      const size_t k = (first + i) % channels_.size();
      status = Attempt(k, timeout, /*wait_for_ready=*/false, call);
      timed_out = timed_out || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (!Unreachable(status)) return status;
    }
    if (!wait_for_reconnect_ || timed_out || channels_.empty()) return status;
    for (const auto& channel : channels_) grpc::experimental::ChannelResetConnectionBackoff(channel.get());
    grpc::Status again = Attempt(first, timeout, /*wait_for_ready=*/true, call);
    return Unreachable(again) ? status : again;
  }

 private:
  static bool Unreachable(const grpc::Status& status) {
    return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  }
  // One call on endpoint `k` within `timeout`; an endpoint that answers is the next call's first.
  // `wait_for_ready`: held until the channel connects, not failed at once while it backs off.
  template <typename Fn>
  grpc::Status Attempt(size_t k, absl::Duration timeout, bool wait_for_ready, Fn&& call) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    ctx.set_wait_for_ready(wait_for_ready);
    grpc::Status status = call(channels_[k], ctx);
    if (!Unreachable(status)) {
      absl::MutexLock lock(&mu_);
      current_ = k;  // stay with the endpoint that answered
    }
    return status;
  }

  const bool wait_for_reconnect_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hetpool::daemon
