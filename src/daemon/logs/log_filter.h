// Shapes a node log on its way to a reader: keeps only one local rank's lines when asked (the
// ones torchrun's --tee tagged "[default<r>]:"), and splits lines longer than a cap, marking the
// continuation, so that a job printing hundreds of megabytes without a newline costs the daemon
// one cap of memory per reader, never the line.
// With labels (the default for readers; GetJobLogsRequest.raw turns them off) each line says
// where it came from: "[node-a r2] " for global rank 2's tagged output, "[node-a] " for the rest
// (workers' stderr, which torchrun does not tag), and torchrun's own chatter (its INFO and
// WARNING log lines, the OMP_NUM_THREADS banner; in PyTorch 2.x's glog form its I and W lines) is
// left out. A rank's last line written without a newline is ended where torchrun's next log line
// starts, so the two writers' text never share a line.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace hetpool::daemon {

inline constexpr size_t kMaxLogLine = 64 * 1024;

// Where a node's lines came from: the node, and the global rank of each local rank once the
// workers are up (empty before, or for an older generation: lines then say "l<local rank>").
struct LogLabels {
  std::string node;
  std::vector<int> global_ranks;
};

class LogFilter {
 public:
  // `local_rank` empty: every line passes. `labels` empty: lines pass as torchrun wrote them.
  // `direct`: the node ran one process the agent started itself (no torchrun): every line is
  // local rank 0's, untagged, and none is torchrun's.
  explicit LogFilter(std::optional<int> local_rank, size_t max_line = kMaxLogLine,
                     std::optional<LogLabels> labels = std::nullopt, bool direct = false);
  // The ranks became known (the filter lives as long as a followed stream).
  void SetGlobalRanks(std::vector<int> global_ranks);

  // The output for the next bytes of the log. Holds back at most the start of a line whose rank
  // tag is not complete yet (shorter than the tag, so it cannot match at the end of the log),
  // and, labelled, a rank's unfinished line's last bytes that may start torchrun's next line.
  std::string Feed(absl::string_view data);
  // The end of the log: what is held back of an unfinished last line.
  std::string Finish();

  // The mark that starts the rest of a split line (after the rank tag, when filtering).
  static constexpr absl::string_view kContinued = "[hetpool: line continues] ";

 private:
  enum class Line { kUndecided, kKeep, kDrop };
  void Decide(std::string& out);
  // Labelled output: keeps or drops the line whose start is head_, relabelled.
  void DecideLabelled(std::string& out);
  size_t HeadBytes() const;  // how much of a line's start decides it
  // Decides head_, and the torchrun line a decision may split off it, as far as they can be.
  void DecideHead(std::string& out);
  std::string Run(absl::string_view data, bool at_end);

  std::optional<int> local_rank_;
  bool direct_;
  std::string prefix_;  // the rank tag; empty: every line passes
  std::optional<LogLabels> labels_;
  std::string label_;    // what starts the current kept line (and its continuations)
  bool tagged_ = false;  // the current line is a rank's (torchrun's tag), not torchrun's own
  std::string carry_;    // held back from the last read, before the next one
  size_t max_line_;
  Line line_ = Line::kUndecided;
  std::string head_;       // the start of the current line, until it is decided
  size_t line_bytes_ = 0;  // bytes of the current line written since the last split
};

}  // namespace hetpool::daemon
