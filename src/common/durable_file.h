// Replacing a small file so that a reader, or the process after a crash or a full disk, finds
// either the old contents or the new ones whole, never a part: ledgers, uid tables, token files.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hetpool {

// Writes `contents` to PATH.tmp (created `mode`, never through a link), flushes it to disk,
// renames it over `path` and flushes the directory. Every step is checked: when one fails
// (ENOSPC in write or fsync, close, rename) `path` keeps its previous contents, the temporary
// file is removed, and the error names the file and the step.
absl::Status ReplaceFileDurably(const std::string& path, absl::string_view contents, mode_t mode = 0600);

}  // namespace hetpool
