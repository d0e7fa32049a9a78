// The rows of a damaged SQLite file read page by page, as `sqlite3 .recover` does, without
// walking its b-trees: a truncated file or a lost interior page ends a table scan at the first
// page it cannot reach, though later leaf pages may still hold whole rows. Every table leaf page
// is parsed on its own (cells, records, overflow chains), and each record is handed over with
// its column values. hetpool's build of SQLite (Debian's) zeroes deleted content
// (SQLITE_SECURE_DELETE), so a free page brings no deleted row back; a caller still prefers what
// a b-tree scan found (the WAL's newer rows among them) and takes from here only what it lacks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"

namespace hetpool::daemon {

// One column of a record: NULL, an integer, a real, or text and blobs as their bytes.
struct SqliteValue {
  enum class Kind { kNull, kInteger, kReal, kText, kBlob } kind = Kind::kNull;
  int64_t integer = 0;
  std::string bytes;
};

struct SqlitePageScan {
  size_t pages = 0;       // pages in the file
  size_t leaf_pages = 0;  // table leaf pages parsed
  size_t records = 0;     // records handed over
  size_t unreadable = 0;  // cells whose record or overflow chain could not be read whole
};

// Calls `record` with the columns of every record on every table leaf page of the file at
// `path` (its page size from the header when that is readable, else 4096).
SqlitePageScan ScanSqlitePages(const std::string& path,
                               const std::function<void(const std::vector<SqliteValue>&)>& record);

}  // namespace hetpool::daemon
