// Ships each job generation's log to the daemon from where it last stopped, and once an exited
// generation's log is all shipped, reads from its tail how it failed (torchrun's report of the
// failed rank, or the container runtime's own words). Shipped bytes are punched out of the file:
// the daemon keeps the output, the node does not keep it twice.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "src/agent/runner.h"

namespace hetpool::agent {

// What the daemon did with a chunk sent at `offset`.
struct ChunkAnswer {
  enum Kind { kTaken, kUnknownJob, kRetry } kind = kRetry;
  uint64_t next_offset = 0;  // kTaken: where the next chunk starts
};
using ChunkSender = std::function<ChunkAnswer(const Runner::Key& key, uint64_t offset, absl::string_view data)>;

class LogShipper {
 public:
  explicit LogShipper(ChunkSender send, size_t chunk_bytes = 256 * 1024)
      : send_(std::move(send)), chunk_bytes_(chunk_bytes) {}

  // Ships what is new in every record's log; true when some exited generation's log is now all
  // shipped (its exit may be reported: `wait` then `logs` is whole).
  bool Ship(std::map<Runner::Key, ProcessRecord>& records);

 private:
  // Sends one chunk at the record's shipped offset; false when the daemon could not take it.
  bool SendChunk(const Runner::Key& key, ProcessRecord& r, absl::string_view data);

  ChunkSender send_;
  size_t chunk_bytes_;
};

// Once an exited generation's whole log is shipped: how it failed, from the log's tail, when it
// failed on its own (not stopped, not failed to launch).
void ReadFailureFromTail(ProcessRecord& r);

}  // namespace hetpool::agent
