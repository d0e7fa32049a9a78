// Store on SQLite in WAL mode with synchronous=NORMAL: a committed transaction is in the WAL file
// (the kernel's page cache) when the call returns, which a crash of the process does not lose;
// Sync() flushes the WAL file to disk, once for every write made before it, on the calling thread
// and beside the writer. Rows hold the serialized protobuf plus the columns queries filter on.
//
// Beside the database, PATH-acked holds the highest job number whose submission a flush has put
// on disk, itself flushed by the same Sync before anything is answered. SQLite reads a WAL only
// up to its first frame that fails its checksum and says nothing of the rest, so a WAL damaged
// or truncated after a crash would otherwise load part of the jobs and hand out their ids again:
// a store whose highest job number is below the mark is refused, naming both files and --recover.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hetpool::daemon {

class SqliteStore : public Store {
 public:
  struct OpenOptions {
    // Flushes the WAL file (fdatasync's contract: 0, or -1 and errno): tests make a disk that fails.
    std::function<int(int)> flush;
    // Compare every index of the tables a start reads with its table (PRAGMA integrity_check),
    // not only the pages (quick_check): --recover does. A start does it on its own when the last
    // shutdown was not clean (a WAL file was left: a clean close checkpoints and removes it).
    bool check_indexes = false;
  };
  // Opens (creating if needed) `path`, e.g. DATA_DIR/hetpool.db.
  // FAILED_PRECONDITION naming the file when the tables a start reads are damaged (PRAGMA
  // quick_check of the live jobs, nodes and meta rows; integrity_check, indexes against their
  // tables, as OpenOptions says), the file is truncated to nothing, or it lacks jobs that were
  // acknowledged (PATH-acked is above its highest job number): a damaged store is never loaded
  // in part. A refused store is left as it was found: until every check has passed, closing the
  // connection does not checkpoint, so the WAL and every frame in it stay for --recover. The
  // archive is not read here (CheckArchive).
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path);
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, std::function<int(int)> flush);
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path, OpenOptions options);
  ~SqliteStore() override;

  // Checks the archive (PRAGMA quick_check of archived_jobs; integrity_check with
  // `check_indexes`) on its own read-only connection. FAILED_PRECONDITION naming the file and
  // --recover when it is damaged; from then on ArchiveJobs refuses (finished jobs stay live) and
  // archive reads answer what SQLite can read.
  absl::Status CheckArchive(bool check_indexes = false);
  // CheckArchive on a thread of the store's, its finding logged; the destructor interrupts it.
  void CheckArchiveInBackground();

  absl::Status PutJob(const hetpool::v1::Job& job) override;
  absl::Status PutNode(const hetpool::v1::Node& node) override;
  absl::StatusOr<std::vector<StoredRow>> LoadJobRows() override;
  absl::StatusOr<std::vector<StoredRow>> LoadNodeRows() override;
  absl::StatusOr<uint64_t> HighestJobSeq() override;
  absl::Status ArchiveJobs(const std::vector<hetpool::v1::Job>& jobs, bool keep) override;
  absl::StatusOr<std::optional<hetpool::v1::Job>> GetArchivedJob(const std::string& id) override;
  absl::StatusOr<std::vector<hetpool::v1::Job>> ArchivedJobsSince(absl::Time since) override;
  absl::Status Sync() override;
  // Writes made, and writes known to be on disk (tests).
  uint64_t writes() const { return writes_.load(); }
  uint64_t synced() const { return synced_.load(); }

  // For recovery (sqlite_recovery.h): many rows in one transaction, and a floor under job ids.
  absl::Status PutAll(const std::vector<hetpool::v1::Job>& jobs, const std::vector<hetpool::v1::Node>& nodes);
  absl::Status RaiseHighestJobSeq(uint64_t seq);

  // PATH-acked, and what it holds: 0 when it does not exist; DATA_LOSS when it does not parse.
  static std::string AckedPath(const std::string& path) { return path + "-acked"; }
  static absl::StatusOr<uint64_t> ReadAcked(const std::string& path);

 private:
  SqliteStore(sqlite3* db, std::string path, std::function<int(int)> flush)
      : path_(std::move(path)), db_(db), flush_(std::move(flush)) {}
  // Every write's result goes through here: it counts the write for Sync (a failed one too: a
  // rolled-back transaction costs a flush, nothing more).
  // A write that committed also makes the job numbers it raised acknowledgeable (Sync's mark).
  absl::Status Wrote(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (status.ok() && txn_seq_ > committed_seq_.load(std::memory_order_relaxed)) {
      committed_seq_.store(txn_seq_, std::memory_order_release);
    }
    txn_seq_ = 0;
    writes_.fetch_add(1, std::memory_order_release);
    return status;
  }
  // Refuses a store that lacks acknowledged jobs (PATH-acked above its highest job number).
  absl::Status CheckAcknowledged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes and flushes PATH-acked with `seq`.
  absl::Status WriteAcked(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_);
  // Refuses writes once a flush failed (Sync).
  absl::Status Writable() const;
  absl::Status FlushWal() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_);
  absl::Status CheckIntegrity(const std::string& path, bool check_indexes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UpsertNode(const hetpool::v1::Node& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RaiseHighestJobSeqLocked(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> HighestJobSeqLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A PutJob waiting for the next group commit. `job` stays valid: its caller waits for `done`.
  struct QueuedJob {
    const hetpool::v1::Job* job = nullptr;
    bool done = false;    // under mu_
    absl::Status status;  // under mu_
  };
  absl::Status UpsertJob(const hetpool::v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The (key, bytes) rows `sql` selects (its ?1 bound to `arg` when given), read under the lock
  // (parsed by the caller outside it); `rows_of` names them in errors.
  absl::StatusOr<std::vector<StoredRow>> ReadRows(const char* sql, absl::string_view rows_of,
                                                  std::optional<int64_t> arg = std::nullopt) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Error(absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  absl::Status archive_damage_ ABSL_GUARDED_BY(mu_);  // what CheckArchive found; OK: nothing
  absl::Mutex check_mu_;
  sqlite3* check_db_ ABSL_GUARDED_BY(check_mu_) = nullptr;  // CheckArchive's connection while it runs
  bool closing_ ABSL_GUARDED_BY(check_mu_) = false;
  std::thread archive_checker_;
  absl::Mutex queue_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<std::shared_ptr<QueuedJob>> queue_ ABSL_GUARDED_BY(queue_mu_);
  // Sync: writes counted as they return, those covered by the last flush, flushes ended (what
  // callers waiting for another's flush wait on), the flusher's lock and the WAL file's own
  // descriptor (kept open: closing a file's descriptor drops the process's locks on it).
  const std::function<int(int)> flush_;
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> synced_{0};
  std::atomic<uint64_t> flushes_{0};
  absl::Mutex flush_mu_;
  int wal_fd_ ABSL_GUARDED_BY(flush_mu_) = -1;
  // The highest job number raised by the open transaction, and by committed ones; the mark on
  // disk (PATH-acked, its descriptor kept open).
  uint64_t txn_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The statements run once per job written or archived, prepared on first use and kept
  // (ReusedStatement): parsing them anew for every job was a third of a submission's store
  // time. Finalized before the database is closed.
  sqlite3_stmt* upsert_job_stmt_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* raise_seq_stmt_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* archive_put_stmt_ ABSL_GUARDED_BY(mu_) = nullptr;
  sqlite3_stmt* archive_delete_stmt_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<uint64_t> committed_seq_{0};
  uint64_t acked_ ABSL_GUARDED_BY(flush_mu_) = 0;
  int acked_fd_ ABSL_GUARDED_BY(flush_mu_) = -1;
  std::atomic<bool> flush_failed_{false};
  mutable absl::Mutex failure_mu_;
  absl::Status flush_failure_ ABSL_GUARDED_BY(failure_mu_);
};

}  // namespace hetpool::daemon
