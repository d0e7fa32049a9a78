// OrderStreams: every agent's open StreamOrders call, served by one sender thread instead of a
// thread each. With gRPC's synchronous server each stream held a thread that woke twice a second
// to look at its node under the state lock and ask gRPC whether the call was cancelled: at 1,000
// nodes that was three times the daemon's CPU for the heartbeats themselves
// (docs/benchmarks.md, "Fleet scale"). Here a stream is a callback reactor that costs nothing
// while its node's orders stay the same: ClusterState tells which node changed (NodeRegistry's
// OrdersListener), the sender reads the orders of every changed node's streams under one
// acquisition of the state lock, and gRPC reports the agent's going (OnCancel).
//
// A stream sends its node's whole orders (in parts, orders_parts.h) whenever their version moves,
// one version at a time: a change while a version is being written is sent once that write ends.
// It ends with NOT_FOUND when its agent session does (a lapsed lease, a new registration), with
// UNAVAILABLE when the daemon stops, and when the agent goes away.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "hetpool/v1/agent.pb.h"
#include "src/daemon/services/callback_streams.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

class OrderStreams : public std::enable_shared_from_this<OrderStreams> {
 public:
  // Watches `state` for changed orders and starts the sender. `state` outlives Stop().
  static std::shared_ptr<OrderStreams> Start(ClusterState* state);
  ~OrderStreams();
  OrderStreams(const OrderStreams&) = delete;
  OrderStreams& operator=(const OrderStreams&) = delete;

  // A stream of `node`'s orders for the agent `session`, whose caller is already authorised. It
  // sends the current orders at once; after Stop it ends at once with UNAVAILABLE.
  grpc::ServerWriteReactor<pb::Orders>* Open(const std::string& node, const std::string& session);
  // Ends every open stream with UNAVAILABLE, stops watching the state and stops the sender.
  // Streams (and this object, which they share) live on until gRPC is done with each of them.
  void Stop();

  // A stream that ends at once with `status`: what a refused StreamOrders call returns.
  static grpc::ServerWriteReactor<pb::Orders>* Refused(const grpc::Status& status);

  // Streams gRPC has not yet finished with (tests wait on it).
  size_t open_streams() const;

 private:
  class Stream;
  friend class HubStream<Stream, OrderStreams, pb::Orders>;
  // What to do to a stream once the lock is released: gRPC's calls are not made under it.
  using Step = StreamStep<Stream, pb::Orders>;

  explicit OrderStreams(ClusterState* state) : state_(state) {}
  void OrdersChanged(const std::string& node);
  void SendLoop();
  // The stream's next step after a write ended (`ok`: it was sent) or the call was cancelled.
  std::optional<Step> AfterWrite(Stream& stream, bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ClusterState* const state_;
  mutable absl::Mutex mu_;
  StreamsByKey<Stream> streams_ ABSL_GUARDED_BY(mu_);   // by node
  std::set<std::string> changed_ ABSL_GUARDED_BY(mu_);  // nodes whose streams the sender looks at
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
};

}  // namespace hetpool::daemon
