// The endpoints of an etcd cluster, for everything in hetpoold that talks to etcd (the store,
// leadership): a call goes to the endpoint that last answered and, while endpoints are
// unreachable, on to the next. Thread-safe.
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

namespace hetpool::daemon {

class EtcdEndpoints {
 public:
  // "host:port[,host:port...]"
  explicit EtcdEndpoints(const std::string& endpoints) {
    for (absl::string_view e : absl::StrSplit(endpoints, ',', absl::SkipWhitespace())) {
      channels_.push_back(grpc::CreateChannel(std::string(e), grpc::InsecureChannelCredentials()));
    }
  }
  bool empty() const { return channels_.empty(); }

  // Runs call(channel, ctx) with `timeout` per attempt, until an endpoint answers (any status
  // but UNAVAILABLE / DEADLINE_EXCEEDED); returns the last status.
  template <typename Fn>
  grpc::Status Call(absl::Duration timeout, Fn&& call) {
    size_t first;
    {
      absl::MutexLock lock(&mu_);
      first = current_;
    }
    grpc::Status status(grpc::StatusCode::UNAVAILABLE, "no etcd endpoint");
    for (size_t i = 0; i < channels_.size(); ++i) {
      const size_t k = (first + i) % channels_.size();
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
      status = call(channels_[k], ctx);
      const bool unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                               status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (!unreachable) {
        absl::MutexLock lock(&mu_);
        current_ = k;  // stay with the endpoint that answered
        return status;
      }
    }
    return status;
  }

 private:
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hetpool::daemon
