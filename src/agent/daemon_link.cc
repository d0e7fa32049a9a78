#include "src/agent/daemon_link.h"

#include <thread>

#include "absl/synchronization/mutex.h"
#include "hetpool/v1/agent.grpc.pb.h"
#include "src/agent/daemon_channel.h"
#include "src/common/orders_parts.h"

namespace hetpool::agent {

namespace pb = ::hetpool::v1;

namespace {

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return ctx;
}

constexpr absl::Duration kCallTimeout = absl::Seconds(5);

class GrpcDaemonLink : public DaemonLink {
 public:
  explicit GrpcDaemonLink(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)), stub_(pb::AgentService::NewStub(channel_)) {}
  ~GrpcDaemonLink() override {
    orders_ctx_.TryCancel();
    if (orders_thread_.joinable()) orders_thread_.join();
  }

  grpc::Status Register(const pb::RegisterRequest& req, pb::RegisterResponse* resp) override {
    return stub_->Register(ContextWithDeadline(kCallTimeout).get(), req, resp);
  }
  grpc::Status Heartbeat(const pb::HeartbeatRequest& req, pb::HeartbeatResponse* resp) override {
    return stub_->Heartbeat(ContextWithDeadline(kCallTimeout).get(), req, resp);
  }
  grpc::Status PushLogs(const pb::PushLogsRequest& req, pb::PushLogsResponse* resp) override {
    return stub_->PushLogs(ContextWithDeadline(kCallTimeout).get(), req, resp);
  }
  bool Connected() override { return channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY; }

  void FollowOrders(const pb::StreamOrdersRequest& req) override {
    orders_thread_ = std::thread([this, req] {
      auto reader = stub_->StreamOrders(&orders_ctx_, req);
      pb::Orders part;
      OrdersAssembler parts;
      while (reader->Read(&part)) {
        std::optional<pb::Orders> orders = parts.Add(std::move(part));
        if (!orders) continue;  // the set is acted on only whole
        absl::MutexLock lock(&mu_);
        pending_ = *std::move(orders);
      }
      grpc::Status finished = reader->Finish();
      absl::MutexLock lock(&mu_);
      ended_ = true;
      end_message_ = finished.error_message();
    });
  }

  void Wake() override {
    absl::MutexLock lock(&mu_);
    woken_ = true;
  }

  OrdersUpdate AwaitOrders(absl::Duration patience) override {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_.has_value() || ended_ || woken_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), patience);
    woken_ = false;
    OrdersUpdate update;
    update.orders.swap(pending_);
    update.ended = ended_;
    update.end_message = end_message_;
    return update;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::AgentService::Stub> stub_;
  grpc::ClientContext orders_ctx_;
  std::thread orders_thread_;
  absl::Mutex mu_;
  std::optional<pb::Orders> pending_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::string end_message_ ABSL_GUARDED_BY(mu_);
};

class GrpcDaemonDialer : public DaemonDialer {
 public:
  explicit GrpcDaemonDialer(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}

  std::unique_ptr<DaemonLink> Dial(const std::string& address) override {
    return std::make_unique<GrpcDaemonLink>(ChannelTo(address));
  }
  void Wait(const std::string* address, absl::Duration patience, absl::Duration period,
            const std::function<bool()>& tick) override {
    std::shared_ptr<grpc::Channel> channel = address != nullptr ? ChannelTo(*address) : nullptr;
    WaitForDaemon(channel.get(), patience, period, tick);
  }

 private:
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address) {
    if (channel_ == nullptr || address_ != address) {
      channel_ = MakeDaemonChannel(address, credentials_);
      address_ = address;
    }
    return channel_;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string address_;
};

}  // namespace

std::unique_ptr<DaemonDialer> MakeGrpcDaemonDialer(std::shared_ptr<grpc::ChannelCredentials> credentials) {
  return std::make_unique<GrpcDaemonDialer>(std::move(credentials));
}

}  // namespace hetpool::agent
