// Shapes a node log on its way to a reader: keeps only one local rank's lines when asked (the
// ones torchrun's --tee tagged "[default<r>]:"), and splits lines longer than a cap, marking the
// continuation, so that a job printing hundreds of megabytes without a newline costs the daemon
// one cap of memory per reader, never the line.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace hetpool::daemon {

inline constexpr size_t kMaxLogLine = 64 * 1024;

class LogFilter {
 public:
  // `local_rank` empty: every line passes.
  explicit LogFilter(std::optional<int> local_rank, size_t max_line = kMaxLogLine);

  // The output for the next bytes of the log. Holds back at most the start of a line whose rank
  // tag is not complete yet (shorter than the tag, so it cannot match at the end of the log).
  std::string Feed(absl::string_view data);

  // The mark that starts the rest of a split line (after the rank tag, when filtering).
  static constexpr absl::string_view kContinued = "[hetpool: line continues] ";

 private:
  enum class Line { kUndecided, kKeep, kDrop };
  void Decide(std::string& out);

  std::string prefix_;        // the rank tag; empty: every line passes
  size_t max_line_;
  Line line_ = Line::kUndecided;
  std::string head_;          // the start of the current line, until it is decided
  size_t line_bytes_ = 0;     // bytes of the current line written since the last split
};

}  // namespace hetpool::daemon
