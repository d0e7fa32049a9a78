// The process groups this agent has started and not yet seen end, kept in a file under the work
// dir. An agent killed with SIGKILL leaves its jobs running (they are their own process groups);
// its successor reads the ledger and stops them before registering, so the daemon's view (no such
// processes: restart the gang) and the node agree, and no generation runs beside its successor.
//
// The ledger is only ever replaced whole and durably (durable_file.h): a write that fails (a full
// work dir) keeps the previous file, and the launch it was for is not started (runner.h). Beside
// the ledger, every job process carries kAgentMarkerVariable=<work dir> in its environment, so a
// successor whose ledger is gone or older than the node still finds what its predecessor started.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hetpool::agent {

// Set by the agent in every job process's environment (its value: the agent's work dir).
inline constexpr const char* kAgentMarkerVariable = "HETPOOL_AGENT_WORK_DIR";

class ProcessLedger {
 public:
  // `path`: the ledger file. `work_dir`: the agent's, the marker's value (empty: no scan).
  ProcessLedger(std::string path, std::string work_dir) : path_(std::move(path)), work_dir_(std::move(work_dir)) {}

  // Records a new group (its leader's pid) for `job` generation `generation`, durably. On an
  // error the ledger (file and memory) is as before and the caller must not let the group run.
  absl::Status Add(pid_t pgid, const std::string& job, uint64_t generation);
  // Forgets a group that ended. A failed write is logged and retried with the next change: the
  // stale line left meanwhile names a group that is gone, which StopLeftovers passes over.
  void Remove(pid_t pgid);

  // Stops every group a previous agent recorded that still exists, and every process whose
  // environment carries this agent's marker (found in /proc: what a lost or stale ledger
  // misses), with SIGTERM, then SIGKILL after `grace`; then empties the ledger. Returns how many
  // groups were stopped.
  int StopLeftovers(absl::Duration grace);

  // The last write's error, when the ledger on disk is behind this agent's processes.
  const absl::Status& last_write() const { return last_write_; }
  // After a failed write: writes what the ledger holds now (the work dir may have room again).
  absl::Status Rewrite() { return Save(entries_); }

 private:
  struct Entry {
    unsigned long long start_time = 0;  // the leader's start time (/proc/PID/stat), against PID reuse
    std::string job;
    uint64_t generation = 0;
  };
  absl::Status Save(const std::map<pid_t, Entry>& entries);

  const std::string path_;
  const std::string work_dir_;
  std::map<pid_t, Entry> entries_;
  absl::Status last_write_;
};

}  // namespace hetpool::agent
