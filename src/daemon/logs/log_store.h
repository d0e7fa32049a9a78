// The daemon's copy of every job's node logs, pushed by agents at offsets (so a resend after a lost
// reply is harmless) and read by GetJobLogs. One file per job, generation and node.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace hetpool::daemon {

class LogStore {
 public:
  explicit LogStore(std::string root) : root_(std::move(root)) {}

  // Writes `data` at `offset` and returns the file's new end. Bytes already held are not written
  // twice; a gap (offset beyond the end) writes nothing and returns the end to resend from.
  absl::StatusOr<uint64_t> Append(const std::string& job_id, uint64_t generation,
                                  const std::string& node, uint64_t offset, absl::string_view data);
  // Up to `max_bytes` from `offset`; empty at the end.
  absl::StatusOr<std::string> Read(const std::string& job_id, uint64_t generation,
                                   const std::string& node, uint64_t offset, size_t max_bytes) const;

 private:
  std::string PathFor(const std::string& job_id, uint64_t generation, const std::string& node) const;
  std::string root_;
};

}  // namespace hetpool::daemon
