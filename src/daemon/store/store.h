// Durable state of the control plane: jobs and nodes. Every write returns once the change survives
// a crash of the process (kill -9), and once Sync() has returned after it, a crash of the machine
// too: hetpoold answers a call, and sends an agent its orders, only after Sync (ApiGuard,
// OrderStreams), so nothing is acknowledged or acted on before it is on disk, while the writes
// made under the state lock do not wait for the disk. SqliteStore is the embedded default;
// EtcdStore keeps the state on an etcd cluster. Both pass one conformance suite
// (tests/integration/store_conformance_test.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hetpool/v1/cluster.pb.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool::daemon {

// One stored row: its key (an id, an etcd key: named when it does not parse) and its bytes.
struct StoredRow {
  std::string key;
  std::string bytes;
};

class Store {
 public:
  virtual ~Store() = default;
  // Insert or replace by id.
  virtual absl::Status PutJob(const hetpool::v1::Job& job) = 0;
  virtual absl::Status PutNode(const hetpool::v1::Node& node) = 0;
  // Every live job as stored, in no particular order: what hetpoold reads at start (it keeps a
  // finished job as its bytes and parses it only when asked for it).
  virtual absl::StatusOr<std::vector<StoredRow>> LoadJobRows() = 0;
  // Every live job, parsed, in submission order; DATA_LOSS naming the first row that is not a job.
  absl::StatusOr<std::vector<hetpool::v1::Job>> LoadJobs();
  // Every node as stored, in no particular order (hetpoold decodes them on several threads).
  virtual absl::StatusOr<std::vector<StoredRow>> LoadNodeRows() = 0;
  // Every node, parsed; DATA_LOSS naming the first row that is not a node.
  absl::StatusOr<std::vector<hetpool::v1::Node>> LoadNodes();
  // The highest job sequence number ever handed out, when the store keeps one apart from the
  // jobs (SQLite: a recovered store may have lost the newest rows, never their numbers). Job ids
  // continue above it and above every loaded job. 0: none kept.
  virtual absl::StatusOr<uint64_t> HighestJobSeq() { return 0; }

  // Job retention (hetpoold --retain-finished): finished jobs leave the live set, which
  // LoadJobs reads at every start, into the archive (`keep`), which only the two calls below
  // read, or are dropped. Each job moves atomically (SQLite: the whole batch in one
  // transaction); HighestJobSeq stays at or above every archived or dropped job's number.
  virtual absl::Status ArchiveJobs(const std::vector<hetpool::v1::Job>& jobs, bool keep) = 0;
  // nullopt when the archive has no such job.
  virtual absl::StatusOr<std::optional<hetpool::v1::Job>> GetArchivedJob(const std::string& id) = 0;
  // Archived jobs that finished at or after `since` (usage accounting), in no particular order.
  virtual absl::StatusOr<std::vector<hetpool::v1::Job>> ArchivedJobsSince(absl::Time since) = 0;

  // Returns once every write that returned before this call survives a crash of the machine.
  // Callers on many threads share one flush (group commit); none holds the state lock. An error
  // is for good: what was written may not be on disk, so the store refuses every write after it
  // and hetpoold must be restarted (it loads what the disk holds). Stores whose writes are on
  // disk when they return (etcd: a quorum's fsync) have nothing to do.
  virtual absl::Status Sync() { return absl::OkStatus(); }
};

}  // namespace hetpool::daemon
