#include "src/daemon/ha/leadership.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::daemon {
Leadership::Leadership(Options options) : options_(std::move(options)), endpoints_(options_.endpoints) {}

absl::StatusOr<std::unique_ptr<Leadership>> Leadership::Start(Options options) {
  if (options.self.empty()) return absl::InvalidArgumentError("leadership needs this replica's address (--advertise)");
  if (options.ttl < absl::Seconds(1)) return absl::InvalidArgumentError("leader lease must be at least 1s");
  std::unique_ptr<Leadership> l(new Leadership(std::move(options)));
  if (l->endpoints_.empty()) return absl::InvalidArgumentError("leadership needs etcd endpoints");
  l->thread_ = std::thread([p = l.get()] { p->Run(); });
  return l;
}

Leadership::~Leadership() { Resign(); }

void Leadership::Resign() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
  leader_ = false;
  if (lease_ != 0) {
    RevokeLease(lease_);
    lease_ = 0;
  }
}

std::string Leadership::Leader() const {
  absl::MutexLock lock(&mu_);
  if (MonotonicNow() - etcd_answered_ > options_.ttl) return "";
  return leader_address_;
}

std::string Leadership::NoLeaderReason() const {
  absl::MutexLock lock(&mu_);
  if (etcd_answered_ == absl::InfinitePast()) return "no leader is elected yet";
  const absl::Duration silent = MonotonicNow() - etcd_answered_;
  if (silent <= options_.ttl) return "no leader is elected yet";
  return absl::StrCat("no leader is known: etcd has not answered this replica for ",
                      absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1))), " (no quorum?)");
}

void Leadership::Run() {
  // A third of the lease between steps: a renewal is missed twice before the lease can lapse.
  const absl::Duration period = options_.ttl / 3;
  do {
    if (!lost_) Step();
  } while (!stop_.WaitForNotificationWithTimeout(period));
}

void Leadership::Step() {
  const int64_t ttl_seconds = std::max<int64_t>(1, absl::ToInt64Seconds(options_.ttl));
  if (lease_ == 0) {
    etcdserverpb::LeaseGrantRequest req;
    req.set_ttl(ttl_seconds);
    etcdserverpb::LeaseGrantResponse resp;
    auto s = endpoints_.Call(options_.ttl / 2, [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext& ctx) {
      return etcdserverpb::Lease::NewStub(ch)->LeaseGrant(&ctx, req, &resp);
    });
    if (!s.ok() || resp.id() == 0) return;
    lease_ = resp.id();
    last_renewed_ = MonotonicNow();
  } else {
    // Renew: one keep-alive round trip on a short stream.
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease_);
    etcdserverpb::LeaseKeepAliveResponse resp;
    bool renewed = false;
    endpoints_.Call(options_.ttl / 2, [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext& ctx) {
      auto stub = etcdserverpb::Lease::NewStub(ch);
      auto stream = stub->LeaseKeepAlive(&ctx);
      if (stream->Write(req) && stream->Read(&resp)) renewed = resp.ttl() > 0;
      stream->WritesDone();
      return stream->Finish();
    });
    if (renewed) {
      last_renewed_ = MonotonicNow();
    } else if (MonotonicNow() - last_renewed_ >= options_.ttl) {
      // The lease has lapsed (or etcd is out of reach for a whole lease): whatever we held is gone.
      spdlog::warn("leader lease {} lapsed", lease_);
      lease_ = 0;
      if (leader_.exchange(false)) {
        lost_ = true;
        if (options_.on_lost) options_.on_lost();
      }
      return;
    }
  }
  Campaign(/*may_take_over=*/true);
}

void Leadership::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  endpoints_.Call(options_.ttl / 2, [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext& ctx) {
    return etcdserverpb::Lease::NewStub(ch)->LeaseRevoke(&ctx, req, &resp);
  });
}

void Leadership::Campaign(bool may_take_over) {
  // Create the key with our lease unless it exists; either way learn who leads.
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(options_.key);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.key);
  put->set_value(options_.self);
  put->set_lease(lease_);
  txn.add_failure()->mutable_request_range()->set_key(options_.key);
  etcdserverpb::TxnResponse resp;
  auto s = endpoints_.Call(options_.ttl / 2, [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext& ctx) {
    return etcdserverpb::KV::NewStub(ch)->Txn(&ctx, txn, &resp);
  });
  if (!s.ok()) return;
  std::string holder;
  int64_t create_revision = 0;
  int64_t holder_lease = 0;
  if (resp.succeeded()) {
    holder = options_.self;
    create_revision = resp.header().revision();
    holder_lease = lease_;
  } else if (!resp.responses().empty() && !resp.responses(0).response_range().kvs().empty()) {
    const auto& kv = resp.responses(0).response_range().kvs(0);
    holder = kv.value();
    create_revision = kv.create_revision();
    holder_lease = kv.lease();
  }
  {
    absl::MutexLock lock(&mu_);
    leader_address_ = holder;
    etcd_answered_ = MonotonicNow();
  }
  const bool ours = holder_lease == lease_ && holder == options_.self;
  if (!ours && holder == options_.self && holder_lease != 0 && may_take_over) {
    // The key names this replica's own address under another lease: its predecessor's, killed or
    // hung before it could resign. This process has bound that address (reuse of the port is off,
    // daemon_server.cc), so no other live replica serves there. Revoking the old lease ends the
    // old key at once instead of a whole lease later (meanwhile this replica answered "not the
    // leader; the leader is at" itself); a predecessor still alive finds its lease gone and
    // stops, and its writes carry the old fencing revision, which etcd refuses from now on.
    spdlog::warn(
        "the leader key names this replica's address {} under lease {}, not this process's: its "
        "predecessor's; revoking it to lead at once",
        holder, holder_lease);
    RevokeLease(holder_lease);
    Campaign(/*may_take_over=*/false);
    return;
  }
  if (ours && !leader_.load()) {
    fencing_revision_ = create_revision;
    leader_ = true;
    spdlog::info("elected leader (fencing revision {})", fencing_revision_);
    if (options_.on_elected) options_.on_elected(fencing_revision_);
  } else if (!ours && leader_.load()) {
    spdlog::error("leadership lost: the key now names {}", holder);
    leader_ = false;
    lost_ = true;
    if (options_.on_lost) options_.on_lost();
  }
}

}  // namespace hetpool::daemon
