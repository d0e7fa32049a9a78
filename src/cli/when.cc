#include "src/cli/when.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/common/flags.h"

namespace hetpool::cli {
namespace {

absl::StatusOr<absl::Time> ParseWhen(const std::string& text, absl::Time now) {
  if (text.size() > 1 && text.back() == 'd') {
    double days = 0;
    if (absl::SimpleAtod(text.substr(0, text.size() - 1), &days) && days >= 0) return now - absl::Hours(24 * days);
  }
  if (auto d = ParseDurationFlag(text); d.ok()) return now - *d;
  absl::Time t;
  std::string err;
  if (absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &t, &err)) return t;
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &err)) return t;
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text, "' is neither a span back from now (7d, 36h) nor a date (2026-11-01, 2026-11-01T08:00:00Z)"));
}

}  // namespace

absl::StatusOr<std::optional<absl::Time>> ParseWhenFlag(const std::string& flag, const std::string& text,
                                                        absl::Time now) {
  if (text.empty()) return std::nullopt;
  auto when = ParseWhen(text, now);
  if (!when.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", when.status().message()));
  return *when;
}

}  // namespace hetpool::cli
