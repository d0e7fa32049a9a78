// How the runner starts, reaps and signals job processes: the one place the agent forks. The
// runner's launch logic (cgroup, ledger, the failure it reports) runs against this interface, so
// it is unit-tested with a fake spawner that forks nothing (Ray's StartProcess seam is the model).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/agent/exec_args.h"
#include "src/agent/job_sandbox.h"

namespace hetpool::agent {

class PrivateTmp;

// Where a launch stopped before its program ran: what the child reports through the exec pipe
// (with the errno), or the parent's own steps.
enum class Stage : int { kWorkingDir, kLogFile, kExec, kAccount, kScript, kNotRecorded, kPrivateTmp };

struct ChildError {
  Stage stage;
  int error;
};

// What a stage's failure says first, and whose failure it is: the job's (its paths) or the node's.
struct StageText {
  const char* says;
  const char* failure;
};
StageText TextOf(Stage stage);

// What the child does, all of it made before the fork: after it, only async-signal-safe calls.
// Its own /tmp (as root, first), the job's account, the working dir, the script's check (as that
// account, where torchrun would open it), then the parent's word that the group is recorded, then
// exec. Anything that fails is reported and the child exits 127.
struct ChildPlan {
  PrivateTmp* private_tmp = nullptr;
  const RunAs* run_as = nullptr;
  bool switch_user = false;
  const char* start_dir = nullptr;
  const char* script = nullptr;  // null: nothing to check
  int log = -1;                  // stdout and stderr; the spawner closes the parent's copy
  const ExecArgs* exec = nullptr;
};

struct Spawned {
  pid_t pid = -1;  // -1: nothing started; `error` says why (pipe, fork)
  std::string error;
  std::optional<ChildError> stopped;  // it stopped before exec (and was reaped): where and why
};

class ProcessSpawner {
 public:
  virtual ~ProcessSpawner() = default;
  // Starts `plan` as the leader of a new process group. `admit(pid)` runs before the child may
  // exec (its cgroup, the ledger): an error there stops it at Stage::kNotRecorded, so no job code
  // runs that a restarted agent would not know to stop.
  virtual Spawned Spawn(const ChildPlan& plan, const std::function<absl::Status(pid_t)>& admit) = 0;
  // The wait status once `pid` (a child of Spawn) exited; nullopt while it runs.
  virtual std::optional<int> Reap(pid_t pid) = 0;
  virtual void SignalGroup(pid_t pgid, int signal) = 0;
  // RANK by LOCAL_RANK of torchrun's workers, read from their environments: the members of
  // group `pgid` (torchrun aside), or `pids`. Empty until all `procs` are seen.
  virtual std::vector<int> RanksInGroup(pid_t pgid, int procs) = 0;
  virtual std::vector<int> RanksOf(const std::vector<pid_t>& pids, int procs) = 0;
};

// fork, execve, waitpid, killpg and /proc.
ProcessSpawner& ForkingSpawner();

}  // namespace hetpool::agent
