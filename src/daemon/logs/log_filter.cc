#include "src/daemon/logs/log_filter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/common/torchrun_lines.h"

namespace hetpool::daemon {

namespace {

// A label is at most "[" + a 63-byte node name + " r" + a rank + "] ".
constexpr size_t kMaxLabel = 96;
// Enough of a line's start to see torchrun's tag or its own log lines.
constexpr size_t kLabelledHead = 64;

}  // namespace

LogFilter::LogFilter(std::optional<int> local_rank, size_t max_line, std::optional<LogLabels> labels, bool direct)
    : local_rank_(local_rank),
      direct_(direct),
      // A direct process's lines are all local rank 0's (the only rank there is), untagged.
      prefix_(local_rank && !direct ? absl::StrCat("[default", *local_rank, "]:") : ""),
      labels_(std::move(labels)),
      // A continuation starts with the tag (or label) and the mark: the cap must leave room.
      max_line_(std::max(max_line, (labels_ ? kMaxLabel : prefix_.size()) + kContinued.size() + 1)) {}

void LogFilter::SetGlobalRanks(std::vector<int> global_ranks) {
  if (labels_) labels_->global_ranks = std::move(global_ranks);
}

size_t LogFilter::HeadBytes() const { return labels_ ? kLabelledHead : std::max<size_t>(prefix_.size(), 1); }

void LogFilter::Decide(std::string& out) {
  if (labels_) {
    DecideLabelled(out);
    return;
  }
  line_ = prefix_.empty() || head_.rfind(prefix_, 0) == 0 ? Line::kKeep : Line::kDrop;
  label_ = prefix_;
  if (line_ == Line::kKeep) out += head_;
  line_bytes_ = head_.size();
  head_.clear();
}

void LogFilter::DecideLabelled(std::string& out) {
  // A direct process's every line is local rank 0's, as if tagged with nothing to strip; none is
  // torchrun's, so none is split where torchrun's would start.
  const auto tag = direct_ ? std::optional<TorchrunRankTag>(TorchrunRankTag{}) : RankTagOf(head_);
  const bool keep = local_rank_ ? tag && tag->local_rank == *local_rank_ : tag || !IsTorchrunChatter(head_);
  std::string rest = tag ? head_.substr(tag->length) : head_;
  tagged_ = tag.has_value() && !direct_;
  if (tag) {
    const int local = tag->local_rank;
    const std::vector<int>& ranks = labels_->global_ranks;
    label_ = local < static_cast<int>(ranks.size())
                 ? absl::StrCat("[", labels_->node, " r", ranks[static_cast<size_t>(local)], "] ")
                 : absl::StrCat("[", labels_->node, " l", local, "] ");
  } else {
    label_ = absl::StrCat("[", labels_->node, "] ");
  }
  if (label_.size() > kMaxLabel) label_ = label_.substr(0, kMaxLabel - 2) + "] ";
  // A rank's last line written without a newline, and torchrun's next log line in the same head:
  // the rank's line ends where torchrun's starts, which is then a line of its own (undecided).
  const size_t torchrun = tagged_ ? FindTorchrunLogLine(rest) : absl::string_view::npos;
  if (torchrun != absl::string_view::npos) {
    if (keep) absl::StrAppend(&out, label_, absl::string_view(rest).substr(0, torchrun), "\n");
    head_ = rest.substr(torchrun);
    line_ = Line::kUndecided;
    line_bytes_ = 0;
    return;
  }
  line_ = keep ? Line::kKeep : Line::kDrop;
  if (keep) absl::StrAppend(&out, label_, rest);
  line_bytes_ = label_.size() + rest.size();
  head_.clear();
}

void LogFilter::DecideHead(std::string& out) {
  while (!head_.empty()) {
    const bool whole = head_.back() == '\n';
    Decide(out);
    if (line_ == Line::kUndecided) {  // a torchrun line was split off: head_ holds its start
      if (head_.back() == '\n' || head_.size() >= HeadBytes()) continue;
      return;  // more of it is needed to judge it
    }
    if (whole) {
      line_ = Line::kUndecided;
      line_bytes_ = 0;
    }
    return;
  }
}

std::string LogFilter::Finish() {
  std::string out = Run(std::exchange(carry_, std::string()), /*at_end=*/true);
  // Each Decide decides the head or splits a shorter one off it.
  while (line_ == Line::kUndecided && !head_.empty()) Decide(out);
  line_ = Line::kUndecided;
  return out;
}

std::string LogFilter::Feed(absl::string_view data) {
  if (carry_.empty()) return Run(data, /*at_end=*/false);
  const std::string joined = std::exchange(carry_, std::string()) + std::string(data);
  return Run(joined, /*at_end=*/false);
}

std::string LogFilter::Run(absl::string_view data, bool at_end) {
  std::string out;
  bool held = at_end;  // at most one tail is held back per read, and none at the end
  while (!data.empty()) {
    if (line_ == Line::kUndecided) {
      // Take bytes until the tag can be judged: its length, or the end of a shorter line.
      const size_t want = HeadBytes() - std::min(head_.size(), HeadBytes());
      const size_t newline = data.substr(0, want).find('\n');
      const size_t take = newline == absl::string_view::npos ? std::min(want, data.size()) : newline + 1;
      head_.append(data.data(), take);
      data.remove_prefix(take);
      if (head_.back() != '\n' && head_.size() < HeadBytes()) continue;
      DecideHead(out);
      continue;
    }
    const size_t newline = data.find('\n');
    const size_t rest = newline == absl::string_view::npos ? data.size() : newline + 1;
    if (labels_ && tagged_ && newline == absl::string_view::npos && !held) {
      // This read ends inside the line, maybe inside the start of torchrun's next line: keep
      // that tail for the next read, which tells.
      held = true;
      if (const size_t unjudged = UnjudgedTorchrunStart(data); unjudged != absl::string_view::npos) {
        carry_ = std::string(data.substr(unjudged));
        data = data.substr(0, unjudged);
        continue;
      }
    }
    if (labels_ && tagged_) {
      // As in DecideLabelled, for torchrun's line coming after the head.
      const absl::string_view line = data.substr(0, rest);
      const size_t torchrun = StartsTorchrunLogLine(line) ? 0 : FindTorchrunLogLine(line);
      if (torchrun != absl::string_view::npos) {
        if (line_ == Line::kKeep) absl::StrAppend(&out, data.substr(0, torchrun), "\n");
        data.remove_prefix(torchrun);
        line_ = Line::kUndecided;
        line_bytes_ = 0;
        continue;
      }
    }
    // Split when the line's text would pass the cap before its end.
    const size_t room = max_line_ > line_bytes_ ? max_line_ - line_bytes_ : 0;
    const size_t text = newline == absl::string_view::npos ? data.size() : newline;
    if (text > room) {
      if (line_ == Line::kKeep) {
        out.append(data.data(), room);
        absl::StrAppend(&out, "\n", label_, kContinued);
      }
      data.remove_prefix(room);
      line_bytes_ = label_.size() + kContinued.size();
      continue;
    }
    if (line_ == Line::kKeep) out.append(data.data(), rest);
    data.remove_prefix(rest);
    line_bytes_ += rest;
    if (newline != absl::string_view::npos) {
      line_ = Line::kUndecided;
      line_bytes_ = 0;
    }
  }
  return out;
}

}  // namespace hetpool::daemon
