#include "src/common/torchrun_lines.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace hetpool {
namespace {

bool IsBanner(absl::string_view line) {
  return absl::StartsWith(line, "*****************") || absl::StartsWith(line, "Setting OMP_NUM_THREADS environment variable");
}

}  // namespace

std::optional<TorchrunRankTag> RankTagOf(absl::string_view line) {
  if (line.empty() || line[0] != '[') return std::nullopt;
  size_t i = 1;
  while (i < line.size() && (absl::ascii_isalpha(line[i]) || line[i] == '_')) ++i;
  const size_t digits = i;
  while (i < line.size() && absl::ascii_isdigit(line[i])) ++i;
  if (i == digits || i - digits > 6 || i + 1 >= line.size() || line[i] != ']' || line[i + 1] != ':') return std::nullopt;
  TorchrunRankTag tag;
  if (!absl::SimpleAtoi(line.substr(digits, i - digits), &tag.local_rank)) return std::nullopt;
  tag.length = i + 2;
  return tag;
}

bool IsTorchrunChatter(absl::string_view line) {
  return absl::StartsWith(line, "INFO:torch.distributed") || absl::StartsWith(line, "WARNING:torch.distributed") ||
         IsBanner(line);
}

bool IsTorchrunOwn(absl::string_view line) {
  for (absl::string_view level : {"DEBUG:", "INFO:", "WARNING:", "ERROR:", "CRITICAL:"}) {
    if (absl::StartsWith(line, level) && absl::StrContains(line, "torch.")) return true;
  }
  return IsBanner(line);
}

}  // namespace hetpool
