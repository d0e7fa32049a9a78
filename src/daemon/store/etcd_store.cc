#include "src/daemon/store/etcd_store.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/daemon/store/parse_rows.h"

namespace hetpool::daemon {
namespace {

constexpr int64_t kPageSize = 500;

// The smallest key above every key that starts with `prefix` (etcd's range_end for a prefix).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      ++prefix.back();
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

}  // namespace

EtcdStore::EtcdStore(const std::string& endpoints, std::string prefix, absl::Duration timeout)
    : endpoints_(endpoints, /*wait_for_reconnect=*/true), prefix_(std::move(prefix)), timeout_(timeout) {}

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Open(const std::string& endpoints, std::string prefix,
                                                           absl::Duration timeout) {
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  std::unique_ptr<EtcdStore> store(new EtcdStore(endpoints, std::move(prefix), timeout));
  if (store->endpoints_.empty()) {
    return absl::InvalidArgumentError("etcd store: no endpoints (etcd://host:port[,host:port...])");
  }
  // One read proves an endpoint answers and the cluster has a quorum (reads are linearizable).
  auto probe = store->List(store->prefix_ + "probe/");
  if (!probe.ok()) {
    return absl::UnavailableError(
        absl::StrCat("etcd store: no endpoint of ", endpoints, " answers: ", probe.status().message()));
  }
  return store;
}

void EtcdStore::SetGuard(std::string key, int64_t create_revision) {
  absl::MutexLock lock(&mu_);
  guard_key_ = std::move(key);
  guard_revision_ = create_revision;
}

absl::Status EtcdStore::GuardedTxn(etcdserverpb::TxnRequest txn, const std::string& what) {
  std::string guard_key;
  int64_t guard_revision = 0;
  {
    absl::MutexLock lock(&mu_);
    guard_key = guard_key_;
    guard_revision = guard_revision_;
  }
  if (!guard_key.empty()) {
    auto* cmp = txn.add_compare();
    cmp->set_key(guard_key);
    cmp->set_target(etcdserverpb::Compare::CREATE);
    cmp->set_result(etcdserverpb::Compare::EQUAL);
    cmp->set_create_revision(guard_revision);
  }
  etcdserverpb::TxnResponse resp;
  const grpc::Status s =
      endpoints_.Call(timeout_, [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext& ctx) {
        return etcdserverpb::KV::NewStub(ch)->Txn(&ctx, txn, &resp);
      });
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("etcd ", what, ": ", s.error_message()));
  if (!resp.succeeded()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd ", what, ": this hetpoold is no longer the leader"));
  }
  return absl::OkStatus();
}

absl::Status EtcdStore::Put(const std::string& key, const std::string& value) {
  etcdserverpb::TxnRequest txn;
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  return GuardedTxn(std::move(txn), absl::StrCat("put ", key));
}

absl::StatusOr<std::optional<std::string>> EtcdStore::Get(const std::string& key) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  etcdserverpb::RangeResponse resp;
  const grpc::Status s =
      endpoints_.Call(timeout_, [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext& ctx) {
        return etcdserverpb::KV::NewStub(ch)->Range(&ctx, req, &resp);
      });
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("etcd get ", key, ": ", s.error_message()));
  if (resp.kvs().empty()) return std::optional<std::string>();
  return std::optional<std::string>(resp.kvs(0).value());
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> EtcdStore::List(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string end = PrefixEnd(dir);
  std::string from = dir;
  while (true) {
    etcdserverpb::RangeRequest req;
    req.set_key(from);
    req.set_range_end(end);
    req.set_limit(kPageSize);
    req.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
    req.set_sort_target(etcdserverpb::RangeRequest::KEY);
    etcdserverpb::RangeResponse resp;
    const grpc::Status s =
        endpoints_.Call(timeout_, [&](const std::shared_ptr<grpc::Channel>& ch, grpc::ClientContext& ctx) {
          return etcdserverpb::KV::NewStub(ch)->Range(&ctx, req, &resp);
        });
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("etcd range ", dir, ": ", s.error_message()));
    for (const auto& kv : resp.kvs()) out.emplace_back(kv.key(), kv.value());
    if (!resp.more() || resp.kvs().empty()) return out;
    from = resp.kvs(resp.kvs_size() - 1).key() + '\0';  // the next key after the last one
  }
}

absl::Status EtcdStore::PutJob(const hetpool::v1::Job& job) {
  return Put(absl::StrCat(prefix_, "jobs/", job.id()), job.SerializeAsString());
}

absl::Status EtcdStore::PutNode(const hetpool::v1::Node& node) {
  return Put(absl::StrCat(prefix_, "nodes/", node.name()), node.SerializeAsString());
}

absl::StatusOr<std::vector<StoredRow>> EtcdStore::Rows(const std::string& dir) {
  auto listed = List(dir);
  if (!listed.ok()) return listed.status();
  std::vector<StoredRow> rows;
  rows.reserve(listed->size());
  for (auto& [key, value] : *listed) rows.push_back({std::move(key), std::move(value)});
  return rows;
}

absl::StatusOr<std::vector<StoredRow>> EtcdStore::LoadJobRows() { return Rows(prefix_ + "jobs/"); }

absl::StatusOr<std::vector<StoredRow>> EtcdStore::LoadNodeRows() { return Rows(prefix_ + "nodes/"); }

absl::StatusOr<uint64_t> EtcdStore::HighestJobSeq() {
  auto value = Get(prefix_ + "meta/highest_job_seq");
  if (!value.ok()) return value.status();
  uint64_t seq = 0;
  if (*value && !absl::SimpleAtoi(**value, &seq)) {
    return absl::DataLossError(absl::StrCat("etcd key ", prefix_, "meta/highest_job_seq: not a number"));
  }
  return seq;
}

absl::Status EtcdStore::ArchiveJobs(const std::vector<hetpool::v1::Job>& jobs, bool keep) {
  // Only the leader writes, so reading the highest sequence and raising it cannot race.
  auto highest = HighestJobSeq();
  if (!highest.ok()) return highest.status();
  uint64_t seq = *highest;
  constexpr size_t kJobsPerTxn = 40;  // 3 operations each, under etcd's default --max-txn-ops 128
  for (size_t first = 0; first < jobs.size(); first += kJobsPerTxn) {
    etcdserverpb::TxnRequest txn;
    for (size_t i = first; i < std::min(jobs.size(), first + kJobsPerTxn); ++i) {
      const hetpool::v1::Job& job = jobs[i];
      if (keep) {
        auto* put = txn.add_success()->mutable_request_put();
        put->set_key(absl::StrCat(prefix_, "archive/", job.id()));
        put->set_value(job.SerializeAsString());
      }
      txn.add_success()->mutable_request_delete_range()->set_key(absl::StrCat(prefix_, "jobs/", job.id()));
      seq = std::max<uint64_t>(seq, job.submit_seq());
    }
    auto* raise = txn.add_success()->mutable_request_put();
    raise->set_key(prefix_ + "meta/highest_job_seq");
    raise->set_value(absl::StrCat(seq));
    if (auto s = GuardedTxn(std::move(txn), absl::StrCat("archive ", jobs[first].id(), "...")); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<hetpool::v1::Job>> EtcdStore::GetArchivedJob(const std::string& id) {
  auto value = Get(absl::StrCat(prefix_, "archive/", id));
  if (!value.ok()) return value.status();
  if (!*value) return std::optional<hetpool::v1::Job>();
  hetpool::v1::Job job;
  if (!job.ParseFromString(**value)) return absl::DataLossError(absl::StrCat("archived job '", id, "' does not parse"));
  return std::optional<hetpool::v1::Job>(std::move(job));
}

absl::StatusOr<std::vector<hetpool::v1::Job>> EtcdStore::ArchivedJobsSince(absl::Time since) {
  auto rows = Rows(prefix_ + "archive/");
  if (!rows.ok()) return rows.status();
  auto all = ParseRows<hetpool::v1::Job>(*std::move(rows), "etcd key");
  if (!all.ok()) return all.status();
  std::vector<hetpool::v1::Job> out;
  for (auto& job : *all) {
    if (job.finished_at().seconds() >= absl::ToUnixSeconds(since)) out.push_back(std::move(job));
  }
  return out;
}

}  // namespace hetpool::daemon
