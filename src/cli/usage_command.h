// `hetpoolctl usage`: card-hours and cost per job, user, group or card class over a window
// (GetUsage), as a table, JSON or CSV.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/cli/client.h"

namespace hetpool::cli {

int UsageCommand(Client& client, const std::vector<std::string>& args);

// "7d", "36h", "90m" back from `now`, or a date "2026-11-01" / time "2026-11-01T08:00:00Z".
absl::StatusOr<absl::Time> ParseWhen(const std::string& text, absl::Time now);

}  // namespace hetpool::cli
