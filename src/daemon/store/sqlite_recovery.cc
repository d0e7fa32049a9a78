#include "src/daemon/store/sqlite_recovery.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "hetpool/v1/cluster.pb.h"
#include "hetpool/v1/job.pb.h"
#include "src/daemon/store/sqlite_pages.h"
#include "src/daemon/store/sqlite_store.h"
#include "src/daemon/store/sqlite_wal.h"

namespace hetpool::daemon {
namespace {

// Steps through `sql` on the damaged file, handing each row's first column to `row`, until the
// end or the first error: a damaged page ends the scan, and what came before it is kept.
template <typename Row>
void ScanRows(sqlite3* db, const char* sql, Row&& row) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) return;
  while (sqlite3_step(stmt) == SQLITE_ROW) row(stmt);
  sqlite3_finalize(stmt);
}

bool IsText(const SqliteValue& v) { return v.kind == SqliteValue::Kind::kText; }
bool IsInteger(const SqliteValue& v) { return v.kind == SqliteValue::Kind::kInteger; }
bool IsBlob(const SqliteValue& v) { return v.kind == SqliteValue::Kind::kBlob; }

// `path` as the path of a file: URI (SQLite's URI filenames: '%', '?' and '#' escaped).
std::string UriPath(const std::string& path) {
  std::string uri;
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      absl::StrAppendFormat(&uri, "%%%02X", static_cast<unsigned char>(c));
    } else {
      uri.push_back(c);
    }
  }
  return uri;
}

// What --recover read back, each job and node once: the first source to hold a row wins, and
// the sources are read newest first.
struct RecoveredRows {
  std::vector<hetpool::v1::Job> jobs;
  std::vector<hetpool::v1::Job> archived;
  std::vector<hetpool::v1::Node> nodes;
  std::set<std::string> have;  // job ids, and "node:" + node names
  uint64_t highest = 0;
  size_t unreadable = 0;

  // Takes `job` (live or archived) unless a newer source had it; false when one had.
  bool TakeJob(hetpool::v1::Job job, bool live) {
    if (!have.insert(job.id()).second) return false;
    highest = std::max<uint64_t>(highest, job.submit_seq());
    (live ? jobs : archived).push_back(std::move(job));
    return true;
  }
  bool TakeNode(hetpool::v1::Node node) {
    if (!have.insert("node:" + node.name()).second) return false;
    nodes.push_back(std::move(node));
    return true;
  }
};

// Reads every table of the database at `uri` through SQLite (NOT INDEXED: each table itself,
// whatever became of its indexes), each until its end or its first damaged page.
void ReadThroughSqlite(const std::string& uri, RecoveredRows& rows) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  // A read-only connection does not checkpoint; this one says so as well: the damaged copy's
  // WAL stays as it is, whatever SQLite could read of it.
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  auto read_jobs = [&](const char* sql, bool live) {
    ScanRows(db, sql, [&](sqlite3_stmt* stmt) {
      hetpool::v1::Job job;
      if (job.ParseFromArray(sqlite3_column_blob(stmt, 0), sqlite3_column_bytes(stmt, 0)) && !job.id().empty()) {
        rows.TakeJob(std::move(job), live);
      } else {
        ++rows.unreadable;
      }
    });
  };
  read_jobs("SELECT data FROM jobs NOT INDEXED", /*live=*/true);
  ScanRows(db, "SELECT data FROM nodes", [&](sqlite3_stmt* stmt) {
    hetpool::v1::Node node;
    if (node.ParseFromArray(sqlite3_column_blob(stmt, 0), sqlite3_column_bytes(stmt, 0)) && !node.name().empty()) {
      rows.TakeNode(std::move(node));
    } else {
      ++rows.unreadable;
    }
  });
  // Archived jobs go back into the archive: `usage` and `get` reach them, and their numbers
  // stay taken.
  read_jobs("SELECT data FROM archived_jobs NOT INDEXED", /*live=*/false);
  ScanRows(db, "SELECT value FROM meta WHERE key = 'highest_job_seq'", [&](sqlite3_stmt* stmt) {
    rows.highest = std::max<uint64_t>(rows.highest, static_cast<uint64_t>(sqlite3_column_int64(stmt, 0)));
  });
  sqlite3_close(db);
}

// The rows the table scans could not reach (a page they could not get past), read page by page
// from the file at `path` (sqlite_pages.h) and told apart by their columns: jobs (id, seq, state,
// user, data), archived jobs (id, finished, data), nodes (name, data) and the meta row. A row a
// scan found is not taken again (its source is newer). Returns how many rows were taken.
size_t SalvagePages(const std::string& path, RecoveredRows& rows) {
  size_t taken = 0;
  const SqlitePageScan scan = ScanSqlitePages(path, [&](const std::vector<SqliteValue>& row) {
    if (row.size() == 2 && IsText(row[0]) && IsInteger(row[1]) && row[0].bytes == "highest_job_seq") {
      rows.highest = std::max<uint64_t>(rows.highest, static_cast<uint64_t>(row[1].integer));
      return;
    }
    const bool live = row.size() == 5 && IsText(row[0]) && IsInteger(row[1]) && IsBlob(row[4]);
    const bool old = row.size() == 3 && IsText(row[0]) && IsInteger(row[1]) && IsBlob(row[2]);
    if ((live || old) && absl::StartsWith(row[0].bytes, "job-")) {
      if (rows.have.contains(row[0].bytes)) return;
      hetpool::v1::Job job;
      if (!job.ParseFromString(row.back().bytes) || job.id() != row[0].bytes) {
        ++rows.unreadable;
        return;
      }
      taken += rows.TakeJob(std::move(job), live) ? 1 : 0;
    } else if (row.size() == 2 && IsText(row[0]) && IsBlob(row[1])) {
      if (rows.have.contains("node:" + row[0].bytes)) return;
      hetpool::v1::Node node;
      if (!node.ParseFromString(row[1].bytes) || node.name() != row[0].bytes) {
        ++rows.unreadable;
        return;
      }
      taken += rows.TakeNode(std::move(node)) ? 1 : 0;
    }
  });
  rows.unreadable += scan.unreadable;
  return taken;
}

}  // namespace

absl::Status CheckRowsParse(SqliteStore& store, const std::string& path) {
  const auto check = [&path]<typename Message>(absl::StatusOr<std::vector<StoredRow>> rows, const char* what,
                                               Message message) -> absl::Status {
    if (!rows.ok()) return rows.status();
    for (const StoredRow& row : *rows) {
      if (!message.ParseFromString(row.bytes)) {
        return absl::DataLossError(absl::StrCat(what, " row '", row.key, "' in ", path, " does not parse"));
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status jobs = check(store.LoadJobRows(), "job", hetpool::v1::Job()); !jobs.ok()) return jobs;
  return check(store.LoadNodeRows(), "node", hetpool::v1::Node());
}

absl::StatusOr<SqliteRecovery> RecoverSqliteStore(const std::string& path, uint64_t seq_floor) {
  SqliteRecovery report;
  report.damaged_copy = absl::StrCat(path, ".damaged-", absl::ToUnixSeconds(absl::Now()));
  std::error_code ec;
  const bool acked_exists = std::filesystem::exists(SqliteStore::AckedPath(path), ec);
  if (!std::filesystem::exists(path, ec) && !acked_exists) {
    return absl::NotFoundError(absl::StrCat(path, ": nothing to recover"));
  }
  // The numbers acknowledged before the damage stay taken, though their rows may be gone. A mark
  // that does not parse says nothing: the rows and the caller's floor decide then.
  uint64_t highest = seq_floor;
  if (auto acked = SqliteStore::ReadAcked(path); acked.ok()) highest = std::max(highest, *acked);
  for (const char* suffix : {"", "-wal", "-shm", "-acked"}) {
    const std::string from = path + suffix;
    if (!std::filesystem::exists(from, ec)) continue;
    std::filesystem::rename(from, report.damaged_copy + suffix, ec);
    if (ec) return absl::InternalError(absl::StrCat("move ", from, " aside: ", ec.message()));
  }

  // Newest first. The WAL's intact frames, those past a bad one included, applied to the
  // database make an image newer than what SQLite reads of the WAL (it stops at the first bad
  // frame); the image is derived, and removed once read. Then the damaged copy through SQLite,
  // then each file page by page for the rows no scan could reach.
  RecoveredRows rows;
  rows.highest = highest;
  const std::string image = report.damaged_copy + "-frames";
  std::vector<std::string> page_sources;
  if (std::filesystem::exists(report.damaged_copy + "-wal", ec)) {
    auto frames = ApplyIntactWalFrames(report.damaged_copy, report.damaged_copy + "-wal", image);
    if (frames.ok()) {
      report.wal = *frames;
      ReadThroughSqlite(absl::StrCat("file:", UriPath(image), "?immutable=1"), rows);
      page_sources.push_back(image);
    } else {
      report.wal_problem = std::string(frames.status().message());
    }
  }
  ReadThroughSqlite(report.damaged_copy, rows);
  page_sources.push_back(report.damaged_copy);
  for (const std::string& source : page_sources) report.salvaged += SalvagePages(source, rows);
  std::filesystem::remove(image, ec);
  highest = rows.highest;
  report.unreadable = rows.unreadable;
  std::vector<hetpool::v1::Job>& jobs = rows.jobs;
  std::vector<hetpool::v1::Job>& archived = rows.archived;
  std::vector<hetpool::v1::Node>& nodes = rows.nodes;

  auto store = SqliteStore::Open(path);
  if (!store.ok()) return store.status();
  if (auto s = (*store)->PutAll(jobs, nodes); !s.ok()) return s;
  // ArchiveJobs writes the archived row and deletes the live one. A move is one transaction, so
  // only damage leaves a job in both: it stays live.
  std::set<std::string> live;
  for (const auto& job : jobs) live.insert(job.id());
  std::erase_if(archived, [&](const hetpool::v1::Job& job) { return live.count(job.id()) > 0; });
  if (auto s = (*store)->ArchiveJobs(archived, /*keep=*/true); !s.ok()) return s;
  if (auto s = (*store)->RaiseHighestJobSeq(highest); !s.ok()) return s;
  if (auto s = (*store)->Sync(); !s.ok()) return s;  // the new store's own mark
  report.jobs = jobs.size();
  report.archived = archived.size();
  report.nodes = nodes.size();
  report.highest_job_seq = highest;
  return report;
}

}  // namespace hetpool::daemon
