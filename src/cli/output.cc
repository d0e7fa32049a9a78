#include "src/cli/output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"

namespace hetpool::cli {

std::string Table::Render(size_t max_width) const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::vector<bool> shown(width.size(), true);
  auto total = [&] {
    size_t sum = 0, columns = 0;
    for (size_t i = 0; i < width.size(); ++i) {
      if (!shown[i]) continue;
      sum += width[i];
      ++columns;
    }
    return sum + (columns > 0 ? 2 * (columns - 1) : 0);
  };
  for (const std::string& name : droppable_) {
    if (max_width == 0 || total() <= max_width) break;
    const auto& header = rows_.front();
    auto it = std::find(header.begin(), header.end(), name);
    if (it != header.end()) shown[static_cast<size_t>(it - header.begin())] = false;
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (!shown[i]) continue;
      line += row[i];
      line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Wrap(const std::string& text, size_t width, size_t indent) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent, ' ');
    } else if (!line.empty() && line.find_first_not_of(' ') != std::string::npos) {
      line += ' ';
    }
    line += std::string(word);
  }
  if (!line.empty()) out += line + "\n";
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

std::string ToJsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out + "\n";
}

std::string Age(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const int64_t d = absl::ToUnixSeconds(absl::Now()) - unix_seconds;
  if (d < 120) return absl::StrCat(d, "s ago");
  if (d < 7200) return absl::StrCat(d / 60, "m ago");
  if (d < 172800) return absl::StrCat(d / 3600, "h ago");
  return absl::StrCat(d / 86400, "d ago");
}

}  // namespace hetpool::cli
