// The agent's work dir kept in bounds (issue 60, item 9: a job's run directory had no size bound
// and was never removed). Two rules, as the kubelet keeps a pod's emptyDir:
//   - A generation that no longer runs loses its run directory (WORK/jobs/JOB/gN, the job's own)
//     and its node log (WORK/logs/JOB/gN; the daemon has its copy) once it ended `retention` ago,
//     by the node log's time (the agent writes it; the run directory's times are the job's).
//   - A running generation whose run directory holds more than `job_disk_limit_mib` is named,
//     for the agent to stop it saying why (0: no limit).
// Both walk what a job wrote without following a link: the tree is the job's, and a job that
// swaps a directory for a link to /etc while it is walked must not turn the agent's privileges
// on /etc. Each step opens the next directory from the last one's descriptor with O_NOFOLLOW.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hetpool::agent {

// Removes `path` and everything under it; a link is removed, never followed. OK when nothing
// is there.
absl::Status RemoveTreeNoFollow(const std::string& path);
// The bytes the files under `path` take on disk (st_blocks), links not followed, mount points
// not crossed.
uint64_t DiskUsageNoFollow(const std::string& path);

struct RunDirJanitorOptions {
  std::string work_dir;
  absl::Duration retention = absl::Hours(72);
  uint64_t job_disk_limit_mib = 0;
};

class RunDirJanitor {
 public:
  using Key = std::pair<std::string, uint64_t>;  // (job id, generation)
  struct Sweep {
    std::vector<Key> removed;                             // generations whose directories went
    std::vector<std::pair<Key, std::string>> over_limit;  // running ones over the limit, and why
  };

  explicit RunDirJanitor(RunDirJanitorOptions options) : options_(std::move(options)) {}
  // `running`: the generations this agent runs or still reports. `now`: wall time, as the files'.
  Sweep Run(const std::set<Key>& running, absl::Time now) const;

 private:
  RunDirJanitorOptions options_;
};

}  // namespace hetpool::agent
