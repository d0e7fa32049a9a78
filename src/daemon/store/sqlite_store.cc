#include "src/daemon/store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/daemon/store/parse_rows.h"

namespace hetpool::daemon {
namespace {

constexpr int kSchemaVersion = 1;

// Finalizes a prepared statement on every path out of a function.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

// One use of a statement the store keeps prepared (`kept`, prepared here on first use): the
// same calls as Statement, and a reset when the use ends, which also drops the bindings (they
// point into the caller's strings).
class ReusedStatement {
 public:
  ReusedStatement(sqlite3* db, sqlite3_stmt*& kept, const char* sql) {
    if (kept == nullptr && sqlite3_prepare_v2(db, sql, -1, &kept, nullptr) != SQLITE_OK) {
      sqlite3_finalize(kept);
      kept = nullptr;
    }
    stmt_ = kept;
  }
  ~ReusedStatement() {
    if (stmt_ == nullptr) return;
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  ReusedStatement(const ReusedStatement&) = delete;
  ReusedStatement& operator=(const ReusedStatement&) = delete;
  bool ok() const { return stmt_ != nullptr; }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// The highest job number among `jobs`: what a transaction writing them raises the store's mark
// to, once.
uint64_t HighestSubmitSeq(const std::vector<hetpool::v1::Job>& jobs) {
  uint64_t highest = 0;
  for (const auto& job : jobs) highest = std::max(highest, job.submit_seq());
  return highest;
}

// How closely TableProblems looks: the pages alone (quick_check: every page of the table and its
// indexes is well formed), or also every index entry against its row (integrity_check: an index
// damaged in place, which quick_check passes, would let the next write add a second row for an
// id that exists).
enum class Check { kPages, kIndexes };

// Runs `PRAGMA quick_check(table)` or `integrity_check(table)` on `db`: "" when the table and
// its indexes are whole, else what SQLite found (the first few problems).
std::string TableProblems(sqlite3* db, const char* table, Check how = Check::kPages) {
  Statement check(
      db, absl::StrCat("PRAGMA ", how == Check::kPages ? "quick_check(" : "integrity_check(", table, ")").c_str());
  if (!check.ok()) return absl::StrCat(table, ": ", sqlite3_errmsg(db));
  std::string problems;
  int rc;
  while ((rc = sqlite3_step(check.get())) == SQLITE_ROW) {
    const char* line = reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0));
    const std::string text = line ? line : "";
    if (text == "ok") continue;
    if (problems.size() < 512) absl::StrAppend(&problems, problems.empty() ? "" : "; ", text);
  }
  if (rc != SQLITE_DONE && problems.empty()) problems = absl::StrCat(table, ": ", sqlite3_errmsg(db));
  return problems;
}

// Steps `stmt`, whose columns are a row's key and its serialized message, into `rows` (parsed
// afterwards, outside the store's lock: ParseRows). False when a step failed.
bool CollectRows(sqlite3_stmt* stmt, std::vector<StoredRow>& rows) {
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char* key = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    const char* blob = static_cast<const char*>(sqlite3_column_blob(stmt, 1));
    rows.push_back({key != nullptr ? key : "",
                    std::string(blob != nullptr ? blob : "", static_cast<size_t>(sqlite3_column_bytes(stmt, 1)))});
  }
  return rc == SQLITE_DONE;
}

absl::Status Damaged(const std::string& path, const std::string& problems, absl::string_view consequence) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is damaged (", problems, "). ", consequence,
                   ": restore it from a backup, or start hetpoold with "
                   "--recover to rebuild it from the rows that can be read (the damaged file is kept beside it; "
                   "docs/reliability.md)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path) {
  return Open(path, OpenOptions{});
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path, std::function<int(int)> flush) {
  return Open(path, OpenOptions{.flush = std::move(flush)});
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path, OpenOptions options) {
  if (!options.flush) options.flush = [](int fd) { return ::fdatasync(fd); };
  // SQLite takes a zero-length file for a new database and would start an empty pool on it. A
  // store hetpoold wrote is never empty (unless its pages are all still in the WAL), so such a
  // file is a truncated one: refuse rather than forget every job.
  // A clean close checkpoints the WAL into the database and removes it: a WAL left behind means
  // the daemon was killed or the machine stopped, and the indexes are compared with their tables.
  std::error_code ec;
  const bool unclean = std::filesystem::exists(path + "-wal", ec) && std::filesystem::file_size(path + "-wal", ec) > 0;
  if (std::filesystem::exists(path, ec) && std::filesystem::file_size(path, ec) == 0 && !ec && !unclean) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " is empty (0 bytes): it was truncated, not created by hetpoold. Restore it from a backup, or start "
        "hetpoold with --recover (keeps the file, starts an empty store whose job ids continue above the old "
        "ones; docs/reliability.md)"));
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", message));
  }
  // Until the checks below pass, closing must not checkpoint. SQLite reads a WAL up to its first
  // frame that fails its checksum; the last connection's close would copy those frames into the
  // database and delete the WAL, and with it every acknowledged job in the frames past the bad
  // one (issue 60: a refused start left 14 of 50). Nothing here writes before the checks either:
  // the CREATE ... IF NOT EXISTS below change nothing in a store that has its tables.
  if (sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr) != SQLITE_OK) {
    std::string message = sqlite3_errmsg(db);
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat("open ", path, ": cannot keep the WAL on close: ", message));
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, path, std::move(options.flush)));
  absl::MutexLock lock(&store->mu_);
  sqlite3_busy_timeout(db, 5000);
  // WAL keeps readers off the writer's path. synchronous=NORMAL: a commit writes the WAL without
  // waiting for the disk, so the writes hetpoold makes under its state lock (a placement, a job
  // that ended) hold it for microseconds, not a flush; Sync() flushes outside that lock, once for
  // every write before it, and nothing is answered before it (store.h). SQLite still flushes the
  // WAL before each checkpoint and the database after it.
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
                          "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
                          " state INTEGER NOT NULL, user TEXT NOT NULL, data BLOB NOT NULL)",
                          "CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq)",
                          "CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, data BLOB NOT NULL)",
                          // The highest job sequence handed out, kept apart from the rows (HighestJobSeq).
                          "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
                          // Finished jobs past their retention: never read at start (ArchiveJobs).
                          "CREATE TABLE IF NOT EXISTS archived_jobs (id TEXT PRIMARY KEY, finished INTEGER NOT NULL,"
                          " data BLOB NOT NULL)",
                          "CREATE INDEX IF NOT EXISTS archived_jobs_finished ON archived_jobs(finished)"}) {
    if (auto s = store->Exec(sql); !s.ok()) {
      // A file cut short ("database disk image is malformed") or whose header is overwritten
      // ("file is not a database") fails here, before any check: it is damage, and --recover's.
      const int code = sqlite3_errcode(db) & 0xff;
      if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
        return Damaged(path, sqlite3_errmsg(db), "hetpoold will not start on it");
      }
      return s;
    }
  }
  // A damaged page (an index, a table) would load part of the jobs and then hand out their ids
  // again: check the whole file before trusting any of it.
  if (auto s = store->CheckIntegrity(path, options.check_indexes || unclean); !s.ok()) return s;
  if (auto s = store->CheckAcknowledged(); !s.ok()) return s;
  Statement version(db, "PRAGMA user_version");
  if (!version.ok() || sqlite3_step(version.get()) != SQLITE_ROW) return store->Error("read schema version");
  const int found = sqlite3_column_int(version.get(), 0);
  if (found > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " has schema version ", found, "; this hetpoold understands up to ", kSchemaVersion));
  }
  // Checked: from here a close checkpoints again (a clean stop leaves no WAL behind).
  if (sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, nullptr) != SQLITE_OK) {
    return store->Error("checkpoint on close");
  }
  if (auto s = store->Exec("PRAGMA user_version=1"); !s.ok()) return s;
  return store;
}

namespace {

// PATH-acked's one line, always the same length, so that rewriting it in place changes no size
// (its flush is the data alone) and a write is one sector.
constexpr absl::string_view kAckedPrefix = "hetpool acknowledged job numbers up to ";
std::string AckedLine(uint64_t seq) { return absl::StrFormat("%s%020u\n", kAckedPrefix, seq); }

}  // namespace

absl::StatusOr<uint64_t> SqliteStore::ReadAcked(const std::string& path) {
  const std::string acked = AckedPath(path);
  std::ifstream in(acked, std::ios::binary);
  if (!in) return 0;
  const std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::string_view text = contents;
  uint64_t seq = 0;
  if (text.empty()) return 0;  // made, never written: nothing was acknowledged yet
  if (!absl::ConsumePrefix(&text, kAckedPrefix) || !absl::ConsumeSuffix(&text, "\n") || !absl::SimpleAtoi(text, &seq)) {
    return absl::DataLossError(
        absl::StrCat(acked, " does not hold the line hetpoold writes (\"", kAckedPrefix, "N\"): it is damaged"));
  }
  return seq;
}

absl::Status SqliteStore::CheckAcknowledged() {
  auto acked = ReadAcked(path_);
  if (!acked.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(acked.status().message(), ". Without it hetpoold cannot tell whether ", path_,
                     " holds every acknowledged "
                     "job. Restore both from a backup, or start hetpoold with --recover (docs/reliability.md)"));
  }
  auto highest = HighestJobSeqLocked();
  if (!highest.ok()) return highest.status();
  const uint64_t held = *highest;
  if (held < *acked) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, " holds job numbers up to ", held, ", but submissions up to ", *acked, " were acknowledged (",
        AckedPath(path_), "): what was written since the last checkpoint is missing, so its write-ahead log ", path_,
        "-wal is damaged or was truncated. hetpoold will not start on it: restore it from a backup, or start "
        "hetpoold with --recover to rebuild it from the rows that can be read (the damaged files are kept beside it, "
        "and job ids continue above ",
        *acked, "; docs/reliability.md)"));
  }
  {
    absl::MutexLock flush_lock(&flush_mu_);
    acked_ = *acked;
  }
  committed_seq_.store(held, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status SqliteStore::WriteAcked(uint64_t seq) {
  if (acked_fd_ < 0) {
    acked_fd_ = ::open(AckedPath(path_).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (acked_fd_ < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", AckedPath(path_)));
  }
  const std::string line = AckedLine(seq);
  if (::pwrite(acked_fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    return absl::ErrnoToStatus(errno, absl::StrCat("write ", AckedPath(path_)));
  }
  if (flush_(acked_fd_) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("fdatasync ", AckedPath(path_)));
  acked_ = seq;
  return absl::OkStatus();
}

absl::Status SqliteStore::CheckIntegrity(const std::string& path, bool check_indexes) {
  // The tables a start reads. The archive (finished jobs past retention, most of a large store's
  // file) is checked apart, after the daemon serves (CheckArchive): a start never walks it.
  std::string problems;
  for (const char* table : {"jobs", "nodes", "meta"}) {
    const std::string found = TableProblems(db_, table, check_indexes ? Check::kIndexes : Check::kPages);
    if (!found.empty()) absl::StrAppend(&problems, problems.empty() ? "" : "; ", found);
  }
  if (problems.empty()) return absl::OkStatus();
  return Damaged(path, problems, "hetpoold will not start on it");
}

absl::Status SqliteStore::CheckArchive(bool check_indexes) {
  // Its own read-only connection: in WAL mode it reads beside the writer, so a check of a large
  // archive holds up no submission.
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("open ", path_, " to check its archive: ", message));
  }
  {
    absl::MutexLock lock(&check_mu_);
    if (closing_) {
      sqlite3_close(db);
      return absl::CancelledError("the store is closing");
    }
    check_db_ = db;
  }
  const std::string problems = TableProblems(db, "archived_jobs", check_indexes ? Check::kIndexes : Check::kPages);
  {
    absl::MutexLock lock(&check_mu_);
    check_db_ = nullptr;
    sqlite3_close(db);
    if (closing_ && !problems.empty()) return absl::CancelledError("the store is closing");
  }
  if (problems.empty()) return absl::OkStatus();
  absl::Status damaged = Damaged(path_, problems, "Finished jobs stay live until it is mended");
  absl::MutexLock lock(&mu_);
  archive_damage_ = damaged;
  return damaged;
}

void SqliteStore::CheckArchiveInBackground() {
  absl::MutexLock lock(&check_mu_);
  if (archive_checker_.joinable() || closing_) return;
  archive_checker_ = std::thread([this] {
    const absl::Status s = CheckArchive();
    if (absl::IsFailedPrecondition(s)) spdlog::error("job archive: {}", std::string(s.message()));
    if (!s.ok() && !absl::IsFailedPrecondition(s) && !absl::IsCancelled(s)) {
      spdlog::warn("job archive not checked: {}", std::string(s.message()));
    }
  });
}

SqliteStore::~SqliteStore() {
  {
    absl::MutexLock lock(&check_mu_);
    closing_ = true;
    if (check_db_ != nullptr) sqlite3_interrupt(check_db_);  // a check of a large archive ends now
  }
  if (archive_checker_.joinable()) archive_checker_.join();
  {
    absl::MutexLock lock(&mu_);
    for (sqlite3_stmt* kept : {upsert_job_stmt_, raise_seq_stmt_, archive_put_stmt_, archive_delete_stmt_}) {
      sqlite3_finalize(kept);  // a database with statements left open does not close
    }
    sqlite3_close(db_);  // checkpoints the WAL into the database, flushing both
  }
  absl::MutexLock lock(&flush_mu_);
  if (wal_fd_ >= 0) ::close(wal_fd_);
  if (acked_fd_ >= 0) ::close(acked_fd_);
}

absl::Status SqliteStore::Writable() const {
  if (!flush_failed_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&failure_mu_);
  return flush_failure_;
}

absl::Status SqliteStore::Sync() {
  const uint64_t mine = writes_.load(std::memory_order_acquire);  // the writes this call covers
  while (true) {
    // Read before looking at synced_: a flush that ends after this moves it, so the wait below
    // cannot miss that flush's end.
    const uint64_t flushes = flushes_.load(std::memory_order_acquire);
    if (absl::Status writable = Writable(); !writable.ok()) return writable;
    if (synced_.load(std::memory_order_acquire) >= mine) return absl::OkStatus();  // a later flush covered them
    if (!flush_mu_.TryLock()) {
      // Another caller is flushing: wait for it to end (all waiters wake at once), then see
      // whether it covered these writes or one more flush is needed.
      flushes_.wait(flushes, std::memory_order_acquire);
      continue;
    }
    if (synced_.load(std::memory_order_acquire) < mine) {
      // Every write counted by now has put its pages in the WAL file: this flush covers them all,
      // and the job numbers they committed (read after them, so none is missed).
      const uint64_t covering = writes_.load(std::memory_order_acquire);
      const uint64_t seq = committed_seq_.load(std::memory_order_acquire);
      absl::Status flushed = FlushWal();
      // The mark follows the WAL to disk, never goes before it: then it never names a job the
      // store could not load.
      if (flushed.ok() && seq > acked_) flushed = WriteAcked(seq);
      if (!flushed.ok()) {
        absl::MutexLock lock(&failure_mu_);
        flush_failure_ = absl::UnavailableError(absl::StrCat(
            "the store could not be flushed to disk (", flushed.message(),
            "): what hetpoold wrote since the last "
            "flush may not be on disk, so it refuses every change and answer from now on. Restart hetpoold: it "
            "loads what the disk holds"));
        flush_failed_.store(true, std::memory_order_release);
        spdlog::critical("{}", std::string(flush_failure_.message()));
      } else {
        synced_.store(covering, std::memory_order_release);
      }
    }
    flush_mu_.Unlock();
    flushes_.fetch_add(1, std::memory_order_release);
    flushes_.notify_all();
  }
}

absl::Status SqliteStore::FlushWal() {
  const std::string wal = path_ + "-wal";
  struct stat named {};
  if (::stat(wal.c_str(), &named) != 0) {
    // No WAL file: SQLite checkpointed it into the database and removed it, flushing both.
    if (errno == ENOENT) return absl::OkStatus();
    return absl::ErrnoToStatus(errno, absl::StrCat("stat ", wal));
  }
  struct stat held {};
  if (wal_fd_ < 0 || ::fstat(wal_fd_, &held) != 0 || held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
    // A WAL file made anew (the old one was checkpointed and removed first).
    if (wal_fd_ >= 0) ::close(wal_fd_);
    wal_fd_ = ::open(wal.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);  // SQLite's own file, never a link
    if (wal_fd_ < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", wal));
  }
  if (flush_(wal_fd_) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("fdatasync ", wal));
  return absl::OkStatus();
}

absl::Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", sql, ": ", message));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Error(absl::string_view what) {
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status SqliteStore::PutJob(const hetpool::v1::Job& job) {
  // Group commit: the write joins the queue; whoever holds the database next commits every
  // queued write in one transaction, and the others find theirs done (the flush to disk is
  // Sync's, shared the same way).
  if (absl::Status writable = Writable(); !writable.ok()) return writable;
  auto write = std::make_shared<QueuedJob>();
  write->job = &job;
  {
    absl::MutexLock lock(&queue_mu_);
    queue_.push_back(write);
  }
  absl::MutexLock lock(&mu_);
  if (write->done) return write->status;
  std::vector<std::shared_ptr<QueuedJob>> batch;
  {
    absl::MutexLock queue_lock(&queue_mu_);
    batch.swap(queue_);
  }
  absl::Status status = Exec("BEGIN IMMEDIATE");
  uint64_t highest_seq = 0;
  for (auto& w : batch) {
    if (status.ok()) status = UpsertJob(*w->job);
    highest_seq = std::max(highest_seq, w->job->submit_seq());
  }
  if (status.ok()) status = RaiseHighestJobSeqLocked(highest_seq);  // once for the batch
  status = status.ok() ? Exec("COMMIT") : status;
  if (!status.ok()) Exec("ROLLBACK").IgnoreError();
  for (auto& w : batch) {
    w->status = status;  // one transaction: all written, or none
    w->done = true;
  }
  Wrote(status).IgnoreError();  // each caller returns its own
  return write->status;
}

absl::Status SqliteStore::UpsertJob(const hetpool::v1::Job& job) {
  const std::string data = job.SerializeAsString();
  ReusedStatement stmt(db_, upsert_job_stmt_,
                       "INSERT INTO jobs (id, seq, state, user, data) VALUES (?1, ?2, ?3, ?4, ?5) "
                       "ON CONFLICT(id) DO UPDATE SET state=excluded.state, data=excluded.data");
  if (!stmt.ok()) return Error("prepare job upsert");
  sqlite3_bind_text(stmt.get(), 1, job.id().data(), static_cast<int>(job.id().size()), SQLITE_STATIC);
  sqlite3_bind_int64(stmt.get(), 2, static_cast<sqlite3_int64>(job.submit_seq()));
  sqlite3_bind_int(stmt.get(), 3, job.state());
  sqlite3_bind_text(stmt.get(), 4, job.spec().user().data(), static_cast<int>(job.spec().user().size()), SQLITE_STATIC);
  sqlite3_bind_blob(stmt.get(), 5, data.data(), static_cast<int>(data.size()), SQLITE_STATIC);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Error(absl::StrCat("write job ", job.id()));
  return absl::OkStatus();
}

absl::Status SqliteStore::RaiseHighestJobSeqLocked(uint64_t seq) {
  txn_seq_ = std::max(txn_seq_, seq);
  ReusedStatement stmt(db_, raise_seq_stmt_,
                       "INSERT INTO meta (key, value) VALUES ('highest_job_seq', ?1) "
                       "ON CONFLICT(key) DO UPDATE SET value=max(value, excluded.value)");
  if (!stmt.ok()) return Error("prepare job sequence update");
  sqlite3_bind_int64(stmt.get(), 1, static_cast<sqlite3_int64>(seq));
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Error("write job sequence");
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SqliteStore::HighestJobSeq() {
  absl::MutexLock lock(&mu_);
  return HighestJobSeqLocked();
}

absl::StatusOr<uint64_t> SqliteStore::HighestJobSeqLocked() {
  Statement stmt(db_, "SELECT value FROM meta WHERE key = 'highest_job_seq'");
  if (!stmt.ok()) return Error("prepare job sequence read");
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) return Error("read job sequence");
  return static_cast<uint64_t>(sqlite3_column_int64(stmt.get(), 0));
}

absl::Status SqliteStore::RaiseHighestJobSeq(uint64_t seq) {
  if (absl::Status writable = Writable(); !writable.ok()) return writable;
  absl::MutexLock lock(&mu_);
  return Wrote(RaiseHighestJobSeqLocked(seq));
}

absl::Status SqliteStore::PutAll(const std::vector<hetpool::v1::Job>& jobs,
                                 const std::vector<hetpool::v1::Node>& nodes) {
  if (absl::Status writable = Writable(); !writable.ok()) return writable;
  absl::MutexLock lock(&mu_);
  absl::Status status = Exec("BEGIN IMMEDIATE");
  for (const auto& job : jobs) {
    if (status.ok()) status = UpsertJob(job);
  }
  if (status.ok() && !jobs.empty()) status = RaiseHighestJobSeqLocked(HighestSubmitSeq(jobs));
  for (const auto& node : nodes) {
    if (status.ok()) status = UpsertNode(node);
  }
  status = status.ok() ? Exec("COMMIT") : status;
  if (!status.ok()) Exec("ROLLBACK").IgnoreError();
  return Wrote(status);
}

absl::Status SqliteStore::PutNode(const hetpool::v1::Node& node) {
  if (absl::Status writable = Writable(); !writable.ok()) return writable;
  absl::MutexLock lock(&mu_);
  return Wrote(UpsertNode(node));
}

absl::Status SqliteStore::UpsertNode(const hetpool::v1::Node& node) {
  const std::string data = node.SerializeAsString();
  Statement stmt(db_,
                 "INSERT INTO nodes (name, data) VALUES (?1, ?2) "
                 "ON CONFLICT(name) DO UPDATE SET data=excluded.data");
  if (!stmt.ok()) return Error("prepare node upsert");
  sqlite3_bind_text(stmt.get(), 1, node.name().data(), static_cast<int>(node.name().size()), SQLITE_STATIC);
  sqlite3_bind_blob(stmt.get(), 2, data.data(), static_cast<int>(data.size()), SQLITE_STATIC);
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Error(absl::StrCat("write node ", node.name()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StoredRow>> SqliteStore::ReadRows(const char* sql, absl::string_view rows_of,
                                                             std::optional<int64_t> arg) {
  std::vector<StoredRow> rows;
  absl::MutexLock lock(&mu_);
  Statement stmt(db_, sql);
  if (!stmt.ok()) return Error(absl::StrCat("prepare the read of ", rows_of));
  if (arg.has_value()) sqlite3_bind_int64(stmt.get(), 1, *arg);
  if (!CollectRows(stmt.get(), rows)) return Error(absl::StrCat("read ", rows_of));
  return rows;
}

absl::StatusOr<std::vector<StoredRow>> SqliteStore::LoadJobRows() {
  return ReadRows("SELECT id, data FROM jobs ORDER BY seq", "jobs");
}

absl::StatusOr<std::vector<StoredRow>> SqliteStore::LoadNodeRows() {
  return ReadRows("SELECT name, data FROM nodes ORDER BY name", "nodes");
}

absl::Status SqliteStore::ArchiveJobs(const std::vector<hetpool::v1::Job>& jobs, bool keep) {
  if (absl::Status writable = Writable(); !writable.ok()) return writable;
  absl::MutexLock lock(&mu_);
  // Writing into a damaged b-tree can spread the damage to pages that were whole.
  if (!archive_damage_.ok()) return archive_damage_;
  absl::Status status = Exec("BEGIN IMMEDIATE");
  for (const auto& job : jobs) {
    if (!status.ok()) break;
    if (keep) {
      const std::string data = job.SerializeAsString();
      ReusedStatement put(db_, archive_put_stmt_,
                          "INSERT OR REPLACE INTO archived_jobs (id, finished, data) VALUES (?1, ?2, ?3)");
      if (!put.ok()) {
        status = Error("prepare archive write");
        break;
      }
      sqlite3_bind_text(put.get(), 1, job.id().data(), static_cast<int>(job.id().size()), SQLITE_STATIC);
      sqlite3_bind_int64(put.get(), 2, job.finished_at().seconds());
      sqlite3_bind_blob(put.get(), 3, data.data(), static_cast<int>(data.size()), SQLITE_STATIC);
      if (sqlite3_step(put.get()) != SQLITE_DONE) status = Error(absl::StrCat("archive job ", job.id()));
    }
    if (status.ok()) {
      ReusedStatement remove(db_, archive_delete_stmt_, "DELETE FROM jobs WHERE id = ?1");
      if (!remove.ok()) {
        status = Error("prepare job delete");
        break;
      }
      sqlite3_bind_text(remove.get(), 1, job.id().data(), static_cast<int>(job.id().size()), SQLITE_STATIC);
      if (sqlite3_step(remove.get()) != SQLITE_DONE) status = Error(absl::StrCat("delete job ", job.id()));
    }
  }
  // The live rows no longer hold these jobs' numbers: the meta row does.
  if (status.ok() && !jobs.empty()) status = RaiseHighestJobSeqLocked(HighestSubmitSeq(jobs));
  status = status.ok() ? Exec("COMMIT") : status;
  if (!status.ok()) Exec("ROLLBACK").IgnoreError();
  return Wrote(status);
}

absl::StatusOr<std::optional<hetpool::v1::Job>> SqliteStore::GetArchivedJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Statement stmt(db_, "SELECT data FROM archived_jobs WHERE id = ?1");
  if (!stmt.ok()) return Error("prepare archive read");
  sqlite3_bind_text(stmt.get(), 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_DONE) return std::optional<hetpool::v1::Job>();
  if (rc != SQLITE_ROW) return Error(absl::StrCat("read archived job ", id));
  hetpool::v1::Job job;
  if (!job.ParseFromArray(sqlite3_column_blob(stmt.get(), 0), sqlite3_column_bytes(stmt.get(), 0))) {
    return absl::DataLossError(absl::StrCat("archived job '", id, "' does not parse"));
  }
  return std::optional<hetpool::v1::Job>(std::move(job));
}

absl::StatusOr<std::vector<hetpool::v1::Job>> SqliteStore::ArchivedJobsSince(absl::Time since) {
  auto rows =
      ReadRows("SELECT id, data FROM archived_jobs WHERE finished >= ?1", "the archive", absl::ToUnixSeconds(since));
  if (!rows.ok()) return rows.status();
  return ParseRows<hetpool::v1::Job>(*std::move(rows), "archived job");
}

}  // namespace hetpool::daemon
