#include "src/daemon/store/sqlite_recovery.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hetpool/v1/cluster.pb.h"
#include "hetpool/v1/job.pb.h"
#include "src/daemon/store/sqlite_pages.h"
#include "src/daemon/store/sqlite_store.h"

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

// The rows the table scans could not reach (a page they could not get past), read page by page
// from the damaged file (sqlite_pages.h) and told apart by their columns: jobs (id, seq, state,
// user, data), archived jobs (id, finished, data), nodes (name, data) and the meta row. A row the
// scans found is not taken again (theirs came through the WAL, which may be newer).
void SalvagePages(SqliteRecovery& report, uint64_t& highest, std::vector<hetpool::v1::Job>& jobs,
                  std::vector<hetpool::v1::Job>& archived, std::vector<hetpool::v1::Node>& nodes) {
  std::set<std::string> have;
  for (const auto* list : {&jobs, &archived}) {
    for (const auto& job : *list) have.insert(job.id());
  }
  for (const auto& node : nodes) have.insert("node:" + node.name());
  std::vector<hetpool::v1::Job> found_jobs, found_archived;
  std::vector<hetpool::v1::Node> found_nodes;
  const SqlitePageScan scan = ScanSqlitePages(report.damaged_copy, [&](const std::vector<SqliteValue>& row) {
    if (row.size() == 2 && IsText(row[0]) && IsInteger(row[1]) && row[0].bytes == "highest_job_seq") {
      highest = std::max<uint64_t>(highest, static_cast<uint64_t>(row[1].integer));
      return;
    }
    const bool live = row.size() == 5 && IsText(row[0]) && IsInteger(row[1]) && IsBlob(row[4]);
    const bool old = row.size() == 3 && IsText(row[0]) && IsInteger(row[1]) && IsBlob(row[2]);
    if ((live || old) && absl::StartsWith(row[0].bytes, "job-")) {
      if (have.contains(row[0].bytes)) return;
      hetpool::v1::Job job;
      if (!job.ParseFromString(row.back().bytes) || job.id() != row[0].bytes) {
        ++report.unreadable;
        return;
      }
      highest = std::max<uint64_t>(highest, job.submit_seq());
      have.insert(job.id());
      (live ? found_jobs : found_archived).push_back(std::move(job));
    } else if (row.size() == 2 && IsText(row[0]) && IsBlob(row[1])) {
      if (have.contains("node:" + row[0].bytes)) return;
      hetpool::v1::Node node;
      if (!node.ParseFromString(row[1].bytes) || node.name() != row[0].bytes) {
        ++report.unreadable;
        return;
      }
      have.insert("node:" + node.name());
      found_nodes.push_back(std::move(node));
    }
  });
  report.salvaged = found_jobs.size() + found_archived.size() + found_nodes.size();
  report.unreadable += scan.unreadable;
  for (auto& job : found_jobs) jobs.push_back(std::move(job));
  for (auto& job : found_archived) archived.push_back(std::move(job));
  for (auto& node : found_nodes) nodes.push_back(std::move(node));
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

  std::vector<hetpool::v1::Job> jobs;
  std::vector<hetpool::v1::Job> archived;
  std::vector<hetpool::v1::Node> nodes;
  sqlite3* old = nullptr;
  if (sqlite3_open_v2(report.damaged_copy.c_str(), &old, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    // NOT INDEXED: read each table itself, whatever became of its indexes.
    auto read_jobs = [&](const char* sql, std::vector<hetpool::v1::Job>& into) {
      ScanRows(old, sql, [&](sqlite3_stmt* stmt) {
        hetpool::v1::Job job;
        if (job.ParseFromArray(sqlite3_column_blob(stmt, 0), sqlite3_column_bytes(stmt, 0)) && !job.id().empty()) {
          highest = std::max<uint64_t>(highest, job.submit_seq());
          into.push_back(std::move(job));
        } else {
          ++report.unreadable;
        }
      });
    };
    read_jobs("SELECT data FROM jobs NOT INDEXED", jobs);
    ScanRows(old, "SELECT data FROM nodes", [&](sqlite3_stmt* stmt) {
      hetpool::v1::Node node;
      if (node.ParseFromArray(sqlite3_column_blob(stmt, 0), sqlite3_column_bytes(stmt, 0)) && !node.name().empty()) {
        nodes.push_back(std::move(node));
      } else {
        ++report.unreadable;
      }
    });
    // Archived jobs go back into the archive: `usage` and `get` reach them, and their numbers
    // stay taken.
    read_jobs("SELECT data FROM archived_jobs NOT INDEXED", archived);
    ScanRows(old, "SELECT value FROM meta WHERE key = 'highest_job_seq'", [&](sqlite3_stmt* stmt) {
      highest = std::max<uint64_t>(highest, static_cast<uint64_t>(sqlite3_column_int64(stmt, 0)));
    });
  }
  sqlite3_close(old);
  SalvagePages(report, highest, jobs, archived, nodes);

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
