// The daemon's copy of every job's node logs, pushed by agents at offsets (so a resend after a lost
// reply is harmless) and read by GetJobLogs. One stream per job, generation and node.
//
// Safety: every path is built from validated ids only (a job id and a node name are single path
// components, never "." or ".."), and every open is relative to a directory descriptor held since
// Open with O_NOFOLLOW, so no request can name a file outside the root or follow a link in it.
// Directories are 0700 and files 0600: job logs carry environment dumps and tracebacks.
//
// Size: a stream keeps at most `max_stream_bytes`, in segments of a quarter of that named by the
// offset of their first byte (<root>/<job>/g<gen>/<node>/<offset>.log). When a stream grows past
// the cap its oldest segment is deleted; offsets never move, and a reader that asks for bytes
// rotated away is told how many it missed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace hetpool::daemon {

struct LogStoreOptions {
  uint64_t max_stream_bytes = 256ull << 20;  // per job, generation and node
};

// What one Read returns.
struct LogSlice {
  uint64_t dropped = 0;  // bytes from the asked offset that rotation removed; `data` follows them
  std::string data;
  bool exists = false;  // the stream was ever written (agents push once even for empty output)
};

class LogStore {
 public:
  // Creates `root` (0700) when missing and holds a descriptor to it.
  static absl::StatusOr<std::unique_ptr<LogStore>> Open(const std::string& root, LogStoreOptions options = {});
  ~LogStore();
  LogStore(const LogStore&) = delete;
  LogStore& operator=(const LogStore&) = delete;

  // Writes `data` at `offset` and returns the stream's new end. Bytes already held are not
  // written twice; a gap (offset beyond the end) writes nothing and returns the end to resend from.
  // INVALID_ARGUMENT for an id that is not a safe path component.
  absl::StatusOr<uint64_t> Append(const std::string& job_id, uint64_t generation, const std::string& node,
                                  uint64_t offset, absl::string_view data);
  // Up to `max_bytes` from `offset`; empty data at the end (or when the stream does not exist).
  absl::StatusOr<LogSlice> Read(const std::string& job_id, uint64_t generation, const std::string& node,
                                uint64_t offset, size_t max_bytes) const;

  const LogStoreOptions& options() const { return options_; }

 private:
  LogStore(int root_fd, LogStoreOptions options) : root_fd_(root_fd), options_(options) {}
  // The stream's directory, opened (and created when `create`) component by component. -1 with
  // an OK status: the stream does not exist and `create` was false.
  absl::StatusOr<int> StreamDir(const std::string& job_id, uint64_t generation, const std::string& node,
                                bool create) const;

  const int root_fd_;
  const LogStoreOptions options_;
  // One writer at a time: appends to a stream come from one agent, but rotation reads the
  // directory and deletes segments, which must not interleave with a second append.
  mutable absl::Mutex mu_;
};

}  // namespace hetpool::daemon
