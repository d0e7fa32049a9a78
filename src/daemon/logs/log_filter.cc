#include "src/daemon/logs/log_filter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hetpool::daemon {

LogFilter::LogFilter(std::optional<int> local_rank, size_t max_line)
    : prefix_(local_rank ? absl::StrCat("[default", *local_rank, "]:") : ""),
      // A continuation starts with the tag and the mark: the cap must leave room after them.
      max_line_(std::max(max_line, prefix_.size() + kContinued.size() + 1)) {}

void LogFilter::Decide(std::string& out) {
  line_ = prefix_.empty() || head_.rfind(prefix_, 0) == 0 ? Line::kKeep : Line::kDrop;
  if (line_ == Line::kKeep) out += head_;
  line_bytes_ = head_.size();
  head_.clear();
}

std::string LogFilter::Feed(absl::string_view data) {
  std::string out;
  while (!data.empty()) {
    if (line_ == Line::kUndecided) {
      // Take bytes until the tag can be judged: its length, or the end of a shorter line.
      const size_t want = std::max<size_t>(prefix_.size(), 1) - std::min(head_.size(), prefix_.size());
      const size_t newline = data.substr(0, want).find('\n');
      const size_t take = newline == absl::string_view::npos ? std::min(want, data.size()) : newline + 1;
      head_.append(data.data(), take);
      data.remove_prefix(take);
      if (head_.back() == '\n') {
        Decide(out);
        line_ = Line::kUndecided;
        continue;
      }
      if (head_.size() < prefix_.size()) continue;
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
        absl::StrAppend(&out, "\n", prefix_, kContinued);
      }
      data.remove_prefix(room);
      line_bytes_ = prefix_.size() + kContinued.size();
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
