// The process groups this agent has started and not yet seen end, kept in a file under the work
// dir. An agent killed with SIGKILL leaves its jobs running (they are their own process groups);
// its successor reads the ledger and stops them before registering, so the daemon's view (no such
// processes: restart the gang) and the node agree, and no generation runs beside its successor.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hetpool::agent {

class ProcessLedger {
 public:
  explicit ProcessLedger(std::string path) : path_(std::move(path)) {}

  // Records a new group (its leader's pid) for `job` generation `generation`, and saves.
  void Add(pid_t pgid, const std::string& job, uint64_t generation);
  void Remove(pid_t pgid);  // and saves

  // Stops every group a previous agent recorded that still exists (SIGTERM, then SIGKILL after
  // `grace`), then empties the ledger. Returns how many groups were stopped.
  int StopLeftovers(absl::Duration grace);

 private:
  struct Entry {
    unsigned long long start_time = 0;  // the leader's start time (/proc/PID/stat), against PID reuse
    std::string job;
    uint64_t generation = 0;
  };
  void Save() const;

  std::string path_;
  std::map<pid_t, Entry> entries_;
};

}  // namespace hetpool::agent
