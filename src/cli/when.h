// A point in time as hetpoolctl's flags take it (`usage --since`, `list --since`): a span back
// from now ("7d", "36h", "90m") or a date ("2026-11-01") or time ("2026-11-01T08:00:00Z").
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hetpool::cli {

// A time flag's value: nullopt when not given (empty), else its time, or INVALID_ARGUMENT
// starting with the flag's name ("--since: 'x' is neither ...").
absl::StatusOr<std::optional<absl::Time>> ParseWhenFlag(const std::string& flag, const std::string& text,
                                                        absl::Time now);

}  // namespace hetpool::cli
