// Where an agent keeps a job generation's files below its work root. Shared by the daemon's launch
// planner (torchrun --log_dir) and the agent (node log), so both agree on the layout.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace hetpool {

inline std::string JobRunDir(const std::string& work_dir, const std::string& job_id, uint64_t generation) {
  return absl::StrCat(work_dir, "/jobs/", job_id, "/g", generation);
}

// A job generation's node log on the agent: outside the run directory, which the job's account
// owns, so a job can never replace it with a link (docs/security.md).
inline std::string JobLogPath(const std::string& work_dir, const std::string& job_id, uint64_t generation) {
  return absl::StrCat(work_dir, "/logs/", job_id, "/g", generation, "/node.log");
}

}  // namespace hetpool
