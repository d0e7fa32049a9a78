// Store on a real etcd cluster through its v3 gRPC API (KV): the control plane's state survives
// the loss of a machine. Each job and node is one key under a prefix, its value the serialized
// protobuf; etcd acknowledges a Put only after a quorum has it on disk, so an acknowledged
// submission survives kill -9 of the daemon and of any etcd minority. Several endpoints may be
// given; a call that finds one unreachable goes on to the next.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "src/daemon/store/etcd_endpoints.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

class EtcdStore : public Store {
 public:
  // `endpoints`: "host:port[,host:port...]" (the etcd://... of --store without its scheme).
  // Fails unless some endpoint answers within `timeout`.
  static absl::StatusOr<std::unique_ptr<EtcdStore>> Open(const std::string& endpoints, std::string prefix = "/hetpool/",
                                                         absl::Duration timeout = absl::Seconds(5));

  // From now on every write is a transaction that succeeds only while `key` still has this
  // create revision: the leader's fencing token (ha/leadership.h). A deposed leader's writes fail.
  void SetGuard(std::string key, int64_t create_revision);

  absl::Status PutJob(const hetpool::v1::Job& job) override;
  absl::Status PutNode(const hetpool::v1::Node& node) override;
  absl::StatusOr<std::vector<StoredRow>> LoadJobRows() override;
  absl::StatusOr<std::vector<StoredRow>> LoadNodeRows() override;
  absl::StatusOr<uint64_t> HighestJobSeq() override;
  // Each job moves in its own transaction (archive key written, live key deleted, the highest
  // sequence raised), batched up to etcd's 128 operations per transaction.
  absl::Status ArchiveJobs(const std::vector<hetpool::v1::Job>& jobs, bool keep) override;
  absl::StatusOr<std::optional<hetpool::v1::Job>> GetArchivedJob(const std::string& id) override;
  // Walks the archive (etcd keeps no secondary index): for accounting queries only.
  absl::StatusOr<std::vector<hetpool::v1::Job>> ArchivedJobsSince(absl::Time since) override;

 private:
  EtcdStore(const std::string& endpoints, std::string prefix, absl::Duration timeout);
  absl::Status Put(const std::string& key, const std::string& value);
  // Runs `txn`'s success operations, guarded by the leader's fencing token when one is set;
  // `what` names the write in errors.
  absl::Status GuardedTxn(etcdserverpb::TxnRequest txn, const std::string& what);
  // The value at `key`, or nullopt.
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key);
  // Every key/value under `dir` (pages of kPageSize, so no reply outgrows gRPC's message limit).
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(const std::string& dir);
  // Every key and value under `dir`, as rows.
  absl::StatusOr<std::vector<StoredRow>> Rows(const std::string& dir);

  EtcdEndpoints endpoints_;
  const std::string prefix_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::string guard_key_ ABSL_GUARDED_BY(mu_);
  int64_t guard_revision_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hetpool::daemon
