#include "src/cli/output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"

namespace hetpool::cli {

std::string Table::Render() const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
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
