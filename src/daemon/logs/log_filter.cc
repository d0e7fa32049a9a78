#include "src/daemon/logs/log_filter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/common/torchrun_lines.h"

namespace hetpool::daemon {

namespace {

// A label is at most "[" + a 63-byte node name + " r" + a rank + "] ".
constexpr size_t kMaxLabel = 96;
// Enough of a line's start to see torchrun's tag or its own log lines.
constexpr size_t kLabelledHead = 64;

}  // namespace

LogFilter::LogFilter(std::optional<int> local_rank, size_t max_line, std::optional<LogLabels> labels)
    : local_rank_(local_rank),
      prefix_(local_rank ? absl::StrCat("[default", *local_rank, "]:") : ""),
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
  const auto tag = RankTagOf(head_);
  const bool keep = local_rank_ ? tag && tag->local_rank == *local_rank_ : tag || !IsTorchrunChatter(head_);
  std::string rest = tag ? head_.substr(tag->length) : head_;
  if (tag) {
    const int local = tag->local_rank;
    const std::vector<int>& ranks = labels_->global_ranks;
    label_ = local < static_cast<int>(ranks.size()) ? absl::StrCat("[", labels_->node, " r", ranks[static_cast<size_t>(local)], "] ")
                                                    : absl::StrCat("[", labels_->node, " l", local, "] ");
  } else {
    label_ = absl::StrCat("[", labels_->node, "] ");
  }
  if (label_.size() > kMaxLabel) label_ = label_.substr(0, kMaxLabel - 2) + "] ";
  line_ = keep ? Line::kKeep : Line::kDrop;
  if (keep) absl::StrAppend(&out, label_, rest);
  line_bytes_ = label_.size() + rest.size();
  head_.clear();
}

std::string LogFilter::Finish() {
  std::string out;
  if (line_ == Line::kUndecided && !head_.empty()) Decide(out);
  line_ = Line::kUndecided;
  return out;
}

std::string LogFilter::Feed(absl::string_view data) {
  std::string out;
  while (!data.empty()) {
    if (line_ == Line::kUndecided) {
      // Take bytes until the tag can be judged: its length, or the end of a shorter line.
      const size_t want = HeadBytes() - std::min(head_.size(), HeadBytes());
      const size_t newline = data.substr(0, want).find('\n');
      const size_t take = newline == absl::string_view::npos ? std::min(want, data.size()) : newline + 1;
      head_.append(data.data(), take);
      data.remove_prefix(take);
      if (head_.back() == '\n') {
        Decide(out);
        line_ = Line::kUndecided;
        continue;
      }
      if (head_.size() < HeadBytes()) continue;
      Decide(out);
      continue;
    }
    const size_t newline = data.find('\n');
    const size_t rest = newline == absl::string_view::npos ? data.size() : newline + 1;
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
