// A SQLite write-ahead log read frame by frame, for --recover. SQLite itself reads a WAL only up
// to its first frame whose checksum fails and ignores everything after it, though the frames past
// a bad one usually hold the newest copy of every page (each commit rewrites the table's last
// leaf and the meta page). Each frame's checksum chains on the one before it, so a frame past a
// bad one can still be checked: its chain starts from the bad frame's stored checksum (the page
// was damaged) or from the one computed over it (the stored checksum was). A frame counts when
// its salts are this log's and its checksum holds; the frames of a transaction apply when a later
// intact commit frame closes it (sqlite.org/fileformat2.html, "The Write-Ahead Log").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace hetpool::daemon {

struct WalSalvage {
  size_t frames = 0;             // whole frames in the file
  size_t intact = 0;             // frames with this log's salts whose checksum holds
  size_t damaged = 0;            // frames with this log's salts whose checksum does not (left out)
  size_t past_first_damage = 0;  // intact frames after the first damaged one: what SQLite would not read
  size_t pages_written = 0;      // pages of the image taken from the log
};

// Writes to `image` the database file `db` (absent or empty: none) with the intact committed
// frames of the log `wal` applied in order, the newest copy of each page last. The image is a
// database file with no log of its own (open it with `immutable=1`). NOT_FOUND when `wal` does
// not exist; DATA_LOSS when its header is not a SQLite log's.
absl::StatusOr<WalSalvage> ApplyIntactWalFrames(const std::string& db, const std::string& wal,
                                                const std::string& image);

}  // namespace hetpool::daemon
