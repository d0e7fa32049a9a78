// Which of several hetpoold replicas leads, decided by etcd (never by hetpool itself): the
// leader holds the key /hetpool/leader, created in a transaction with its lease; the key's
// create revision is its fencing token. Followers keep trying to create the key, which succeeds
// once the leader's lease has lapsed (it died, or lost etcd). A leader that cannot renew its
// lease, or finds the key gone or someone else's, calls on_lost: it must stop acting at once.
// Its writes are guarded by the token as well (EtcdStore::SetGuard), so nothing it sends after
// losing the key lands.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "src/daemon/store/etcd_endpoints.h"

namespace hetpool::daemon {

class Leadership {
 public:
  struct Options {
    std::string endpoints;  // host:port[,host:port...]
    std::string key = "/hetpool/leader";
    std::string self;                                          // this replica's client address, as the key's value
    absl::Duration ttl = absl::Seconds(2);                     // lease; how long a dead leader keeps the key
    std::function<void(int64_t fencing_revision)> on_elected;  // called once, from the campaign thread
    std::function<void()> on_lost;                             // called once, from the campaign thread
  };
  static absl::StatusOr<std::unique_ptr<Leadership>> Start(Options options);
  ~Leadership();  // Resign()
  // Stops campaigning and revokes the lease: a clean stop hands over at once. Idempotent.
  void Resign();

  bool IsLeader() const { return leader_.load(); }
  // The leader's address as etcd last said it; "" when unknown, or when etcd has not answered
  // this replica for a lease (the leader named then may be long dead: etcd without quorum).
  std::string Leader() const;
  // Why Leader() is "": "no leader is elected yet", or that etcd has not answered for a while.
  std::string NoLeaderReason() const;

 private:
  explicit Leadership(Options options);
  void Run();
  // Renews (or takes) this replica's lease, then campaigns.
  void Step();
  // Creates the leader key unless it exists, and learns who leads. `may_take_over`: a key naming
  // this replica's own address under a predecessor's lease is revoked and the campaign run again.
  void Campaign(bool may_take_over);
  void RevokeLease(int64_t lease);

  Options options_;
  EtcdEndpoints endpoints_;
  int64_t lease_ = 0;
  int64_t fencing_revision_ = 0;
  absl::Time last_renewed_;
  std::atomic<bool> leader_{false};
  bool lost_ = false;
  mutable absl::Mutex mu_;
  std::string leader_address_ ABSL_GUARDED_BY(mu_);
  absl::Time etcd_answered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // the last campaign etcd answered
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace hetpool::daemon
