#include "src/daemon/services/order_streams.h"

#include <utility>

#include "src/common/grpc_status.h"
#include "src/common/orders_parts.h"

namespace hetpool::daemon {
namespace {

grpc::Status ShuttingDown() { return ToGrpcStatus(absl::UnavailableError("hetpoold is shutting down")); }
grpc::Status AgentGone() { return grpc::Status(grpc::StatusCode::CANCELLED, "the agent went away"); }

}  // namespace

// One agent's StreamOrders call. gRPC calls its reactions on its own threads; every field below
// is read and written under the owning OrderStreams' lock. At most one write is outstanding
// (`writing`), Finish is called once (`finished`) and never while a write is outstanding: whoever
// sets one of them under the lock makes the gRPC call after releasing it.
class OrderStreams::Stream final : public HubStream<Stream, OrderStreams, pb::Orders> {
 public:
  Stream(std::shared_ptr<OrderStreams> hub, std::string node_name, std::string session_id)
      : HubStream(std::move(hub)), node(std::move(node_name)), session(std::move(session_id)) {}
  const std::string& key() const { return node; }
  static grpc::Status Gone() { return AgentGone(); }

  const std::string node;
  const std::string session;
  uint64_t sent_version = 0;      // the last version whose parts were all handed to gRPC
  std::vector<pb::Orders> parts;  // the version being written
  size_t next_part = 0;
  bool writing = false;
  bool finished = false;
  bool look_again = false;  // the node changed while a version was being written
  std::optional<grpc::Status> finish_after_write;
};

std::shared_ptr<OrderStreams> OrderStreams::Start(ClusterState* state) {
  std::shared_ptr<OrderStreams> streams(new OrderStreams(state));
  OrderStreams* raw = streams.get();  // the listener is removed by Stop, before the last reference goes
  state->WatchOrders([raw](const std::string& node) { raw->OrdersChanged(node); });
  streams->sender_ = std::thread([raw] { raw->SendLoop(); });
  return streams;
}

OrderStreams::~OrderStreams() { Stop(); }

grpc::ServerWriteReactor<pb::Orders>* OrderStreams::Refused(const grpc::Status& status) {
  return new RefusedStream<pb::Orders>(status);
}

grpc::ServerWriteReactor<pb::Orders>* OrderStreams::Open(const std::string& node, const std::string& session) {
  auto stream = std::make_shared<Stream>(shared_from_this(), node, session);
  absl::MutexLock lock(&mu_);
  if (stopping_) return Refused(ShuttingDown());
  streams_[node].push_back(stream);
  changed_.insert(node);  // the sender checks the session and sends the current orders
  return stream.get();    // gRPC calls may come before it is bound: the reactor keeps them
}

void OrderStreams::Stop() {
  std::vector<Step> steps;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    steps = FinishAll<Stream, pb::Orders>(streams_, ShuttingDown());
  }
  state_->WatchOrders(nullptr);  // under the state's lock: no listener call is under way after it
  if (sender_.joinable()) sender_.join();
  for (const Step& step : steps) step.Run();
}

size_t OrderStreams::open_streams() const {
  absl::MutexLock lock(&mu_);
  return CountStreams(streams_);
}

void OrderStreams::OrdersChanged(const std::string& node) {
  absl::MutexLock lock(&mu_);
  if (streams_.contains(node)) changed_.insert(node);
}

void OrderStreams::SendLoop() {
  while (true) {
    std::vector<std::shared_ptr<Stream>> batch;
    std::vector<ClusterState::OrdersCursor> cursors;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](OrderStreams* self) ABSL_NO_THREAD_SAFETY_ANALYSIS { return self->stopping_ || !self->changed_.empty(); },
          this));
      if (stopping_) return;
      for (const std::string& node : changed_) {
        auto it = streams_.find(node);
        if (it == streams_.end()) continue;
        for (const auto& stream : it->second) {
          if (stream->finished) continue;
          if (stream->writing) {
            stream->look_again = true;
            continue;
          }
          batch.push_back(stream);
          cursors.push_back({stream->node, stream->session, stream->sent_version});
        }
      }
      changed_.clear();
    }
    if (batch.empty()) continue;
    // Every changed stream's orders under one acquisition of the state lock, none of ours held.
    auto orders = state_->OrdersSince(cursors);
    std::vector<Step> steps;
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < batch.size(); ++i) {
        Stream& stream = *batch[i];
        if (stream.finished || stream.writing) continue;  // cancelled or stopped meanwhile
        if (!orders[i].ok()) {
          stream.finished = true;
          steps.push_back({batch[i], nullptr, ToGrpcStatus(orders[i].status())});
        } else if (orders[i]->has_value()) {
          stream.parts = SplitOrders(**orders[i]);
          stream.sent_version = (*orders[i])->version();
          stream.next_part = 1;
          stream.writing = true;
          steps.push_back({batch[i], &stream.parts.front(), grpc::Status::OK});
        }
      }
    }
    for (const Step& step : steps) step.Run();
  }
}

std::optional<OrderStreams::Step> OrderStreams::AfterWrite(Stream& stream, bool ok) {
  // The hub holds the stream until OnDone, which comes after this reaction.
  std::shared_ptr<Stream> self = stream.shared_from_this();
  if (!ok || stream.finish_after_write) {
    // A failed write: the call is over (cancelled, the agent gone); Finish is still owed.
    stream.writing = false;
    stream.finished = true;
    return Step{self, nullptr, stream.finish_after_write.value_or(AgentGone())};
  }
  if (stream.next_part < stream.parts.size()) return Step{self, &stream.parts[stream.next_part++], grpc::Status::OK};
  stream.writing = false;
  stream.parts.clear();
  if (stream.look_again) {
    stream.look_again = false;
    changed_.insert(stream.node);
  }
  return std::nullopt;
}

}  // namespace hetpool::daemon
