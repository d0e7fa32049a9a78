#include "src/common/cpu_list.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hetpool {

std::set<int> ParseCpuList(absl::string_view list) {
  std::set<int> out;
  for (absl::string_view part : absl::StrSplit(absl::StripAsciiWhitespace(list), ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int from = 0, to = 0;
    if (!absl::SimpleAtoi(ends[0], &from) || from < 0) continue;
    to = from;
    if (ends.size() == 2 && (!absl::SimpleAtoi(ends[1], &to) || to < from || to - from > 65536)) continue;
    for (int cpu = from; cpu <= to; ++cpu) out.insert(cpu);
  }
  return out;
}

std::string FormatCpuList(const std::set<int>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    const int from = *it;
    int to = from;
    for (++it; it != cpus.end() && *it == to + 1; ++it) to = *it;
    absl::StrAppend(&out, out.empty() ? "" : ",", from, to == from ? "" : absl::StrCat("-", to));
  }
  return out;
}

}  // namespace hetpool
