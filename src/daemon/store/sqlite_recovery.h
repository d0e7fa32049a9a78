// hetpoold --recover: rebuilds a damaged or truncated hetpool.db from the rows that can still be
// read: each table scanned through SQLite, first in an image of the database with every intact
// frame of its WAL applied (sqlite_wal.h: those past a bad frame too, which SQLite would not
// read), then in the file with its WAL as SQLite reads it; then every page of both read on its
// own for the rows those scans could not reach (sqlite_pages.h). The damaged file (its WAL and
// its mark of acknowledged ids too) is kept beside the new one, renamed, never deleted, and job
// ids continue above everything the old store or the caller knew of, so no id is handed out twice
// even when the newest rows are the ones lost.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "src/daemon/store/sqlite_wal.h"

namespace hetpool::daemon {

struct SqliteRecovery {
  std::string damaged_copy;  // where the old file now is
  size_t jobs = 0;           // rows read back
  size_t archived = 0;       // archived jobs read back (into the new store's archive)
  size_t nodes = 0;
  size_t unreadable = 0;         // rows that did not parse (set aside: they stay in the damaged copy)
  size_t salvaged = 0;           // of those read back, rows the table scans could not reach, read page by page
  uint64_t highest_job_seq = 0;  // the new store's floor under job ids
  WalSalvage wal;                // the WAL's frames, read one by one (its intact frames past a bad one are read too)
  std::string wal_problem;       // why the WAL's frames could not be read, when they could not
};

// `seq_floor`: the highest job number known from elsewhere (job log directories, the audit log).
absl::StatusOr<SqliteRecovery> RecoverSqliteStore(const std::string& path, uint64_t seq_floor);

class SqliteStore;
// DATA_LOSS naming `store`'s file and the first job or node row that does not parse: damage
// inside a row, where its page is whole (PRAGMA quick_check passes) but a start cannot load it.
// --recover runs this on a store that opened, and rebuilds it when a row is found.
absl::Status CheckRowsParse(SqliteStore& store, const std::string& path);

}  // namespace hetpool::daemon
