// Runner: starts each launch as its own process group with execve (never a shell), sends its
// output to a log file, reaps it, and stops it (SIGTERM to the group, SIGKILL after a grace).
// Not thread-safe: the agent's session calls it from one thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/agent/card_holders.h"
#include "src/agent/container_runtime.h"
#include "src/agent/fence_watchdog.h"
#include "src/agent/job_cgroup.h"
#include "src/agent/job_sandbox.h"
#include "src/agent/process_ledger.h"
#include "src/agent/torchrun_failure.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {

struct ChildPlan;  // process_spawner.h: what a launch's child does
class ProcessSpawner;

struct LaunchSpec {
  std::string job_id;
  uint64_t generation = 0;
  std::vector<std::string> argv;           // argv[0] is an absolute path
  std::map<std::string, std::string> env;  // the complete environment of the process
  std::string working_dir;
  std::string run_dir;   // the job account's own directory (HOME, torchrun logs)
  std::string log_path;  // stdout and stderr go here; in an agent-only directory
  std::vector<std::string> device_ids;
  std::string note;  // remark for the job's events (AddNote)
  int procs = 0;     // workers torchrun will start (for rank discovery)
  // argv is the job's one process itself, not torchrun (NodeLaunchPlan.launcher "direct"): its
  // rank is known (0), its exit status is the job's, and its output is untagged.
  bool direct = false;
  RunAs run_as;                                  // the account the processes run as
  std::string refused;                           // non-empty: do not start; report exit 127 with this
  std::string refused_failure = "LaunchFailed";  // what kind of launch failure `refused` is
  std::string held_for;                          // non-empty: not yet (the launch gate holds it), why
  // "working dir /srv/code is not writable by the job's account nobody (uid 65534)" when it is
  // not (most scripts save their checkpoints there): said when the job starts, and with its
  // failure. Not refused: a job may write nothing there.
  std::string working_dir_unwritable;
  int hosted_rendezvous_port = 0;  // the rendezvous port torchrun listens on here (0: none)
  // python.script (relative to working_dir or absolute): checked readable by the job's account
  // before torchrun starts; empty for commands.
  std::string script;
  // The job's cgroup limits, when the agent confines jobs (job_cgroup.h).
  JobLimits limits;
  // A /tmp of its own (private_tmp.h), keeping these paths of the host's /tmp in view.
  bool private_tmp = false;
  std::vector<std::string> keep_in_tmp;
  // With private_tmp, a /dev/shm of its own too (private_tmp.h), sized by limits.memory_mib.
  bool private_shm = false;
  std::string user;  // the hetpool user who owns the job
  // In a container image: the run, less what Start fills in (the cgroup parent, the env file).
  // The runtime is exec'd as root and the container runs as run_as; argv above is its command.
  std::optional<ContainerRun> container;

  // Adds a remark to `note` ("; " between remarks): each step of building a launch may say one.
  void AddNote(absl::string_view words) { note = note.empty() ? std::string(words) : absl::StrCat(note, "; ", words); }
};

struct ProcessRecord {
  LaunchSpec spec;
  pid_t pid = 0;
  bool exited = false;
  int exit_code = 0;
  int signal = 0;  // the signal that ended it (exit_code is then 128 + it)
  std::string message;
  bool kill_sent = false;
  absl::Time kill_sent_at;
  std::string kill_reason;
  absl::Duration kill_grace;  // SIGTERM to SIGKILL for this kill
  uint64_t log_pushed = 0;    // bytes of log_path the daemon holds
  // The last kLogTailBytes pushed: the file's pushed bytes are punched out, and torchrun's
  // failure report is read from here once the whole log is pushed.
  std::string log_tail;
  bool logs_flushed = false;
  std::vector<int> global_ranks;  // indexed by LOCAL_RANK; filled once every worker is seen
  // Why the launch failed (exit 127): ScriptNotFound, WorkingDirNotFound or LaunchFailed.
  std::string launch_failure;
  // After torchrun exited non-zero on its own and its log is pushed: the rank that failed.
  std::optional<TorchrunFailure> torchrun_failure;
  // When torchrun logged a worker's failure while it still ran (InfiniteFuture: it has not), and
  // whether the agent stopped it for lingering past that (Runner::StopLingering).
  absl::Time rank_failed_at = absl::InfiniteFuture();
  bool stopped_after_rank_failure = false;
  // Output lost to a full filesystem under log_path: the job's own writes fail with ENOSPC,
  // which the agent cannot see, so it watches the free space instead. Each span the disk was
  // full while the job ran (end InfiniteFuture: still full); OutputLost() says it in words.
  std::vector<std::pair<absl::Time, absl::Time>> disk_full;
  // The generation's cgroup while it exists (confined agents); what confines it, in words; the
  // processes found in it after torchrun exited and killed; the memory limit the kernel's OOM
  // killer acted at (0: it did not).
  std::shared_ptr<JobCgroup> cgroup;
  std::string confinement;
  int strays_killed = 0;
  uint64_t out_of_memory_mib = 0;
  // Processes of the job's account still holding its cards after it ended, which the agent
  // killed: "pid 4242 (uid 61184, python3) holds 2658 MiB of nvidia0".
  std::vector<std::string> card_leftovers;
  // In an image: the runtime's command line as run (argv[0] the runtime, torchrun's argv last).
  std::vector<std::string> runtime_argv;
};

// "output written from 19:20:01 to 19:21:30 UTC is lost: /var/lib/x had no space left", or ""
// when the disk never filled.
std::string OutputLost(const ProcessRecord& record);

inline constexpr size_t kLogTailBytes = 64 * 1024;

struct RunnerOptions {
  absl::Duration kill_grace = absl::Seconds(10);
  ProcessLedger* ledger = nullptr;     // records started groups on disk, when set
  FenceWatchdog* watchdog = nullptr;   // kills the groups if the agent stops renewing, when set
  Confinement* confinement = nullptr;  // a cgroup per generation, when set
  // Every process the vendor libraries list on the node's cards, by device id (empty where no
  // library can tell); when set, what a job leaves on its cards is ended at its exit.
  std::function<std::vector<std::pair<std::string, CardProcess>>()> card_processes;
  ContainerRuntime* container_runtime = nullptr;  // for launches in images, when the node has one
  // Seams for tests: the clock kill graces run on, and what forks, reaps and signals (null: the
  // forking one, process_spawner.h).
  MonotonicClock clock = MonotonicNow;
  ProcessSpawner* spawner = nullptr;
};

class Runner {
 public:
  using Key = std::pair<std::string, uint64_t>;  // (job id, generation)

  explicit Runner(RunnerOptions options);

  // Starts the process. A failure to start (bad working dir, exec error) is not an error of this
  // call: the record is created already exited with code 127 and the reason, so the daemon hears
  // of it like any other exit.
  void Start(const LaunchSpec& spec);
  // Asks the process group to stop; escalates to SIGKILL in Poll() after `grace` (zero: the
  // agent's --kill-grace; a preempted job's own preemption_grace otherwise).
  void Kill(const Key& key, const std::string& reason, absl::Duration grace = absl::ZeroDuration());
  void KillAll(const std::string& reason);
  // Reaps exits and escalates kills. Returns true if any process exited or revealed its ranks.
  bool Poll();
  // Stops each generation whose torchrun logged a worker's failure `grace` ago and still runs: a
  // torchrun whose rank failed waits at its exit barrier for the other nodes' (PyTorch 1.13: up
  // to 300 s), whose ranks may be stuck in a collective with the dead one, holding the cards
  // meanwhile. Its exit then reports that first failure. True when it stopped one.
  bool StopLingering(absl::Duration grace);
  void Forget(const Key& key) { records_.erase(key); }

  std::map<Key, ProcessRecord>& records() { return records_; }
  const std::map<Key, ProcessRecord>& records() const { return records_; }
  bool AnyRunning() const;
  // Whose processes still run as `uid` for a user other than `user` ("job-000007 g1 of bob"),
  // "" when none: two users never share a uid while a process of the first lives (an
  // operator's --run-as-map may send several users to one account). Root is not guarded.
  std::string UidHolder(uid_t uid, const std::string& user) const;
  bool Empty() const { return records_.empty(); }  // nothing left to run or to report
  // The generations still running, for telling whose a process on a card is.
  std::vector<JobOwnership> RunningJobs() const;

 private:
  // Start's steps. The run directory, made and given to the job's account.
  static void PrepareRunDir(const LaunchSpec& spec);
  // The generation's cgroup, made before its first process; false (the launch failed, said in
  // `record`) when it cannot be.
  bool Confine(ProcessRecord& record);
  static void DropCgroup(ProcessRecord& record);
  // Forks the child that runs `plan`, records it (cgroup, ledger) before it may exec, and reads
  // its report: started, or why not (`program`: what it would have executed).
  void Launch(const Key& key, ProcessRecord& record, const ChildPlan& plan, const std::string& program);

  // Notes when the filesystem under each running job's log fills and frees (ProcessRecord::
  // disk_full); once it frees, says so in the log itself, which is pushed like the job's output.
  void WatchLogSpace();
  // After torchrun exited: kills what is left in the generation's cgroup (counted as strays),
  // notes an OOM kill, and removes the cgroup; one that will not empty is retried next Poll.
  void EndCgroup(const Key& key, ProcessRecord& r);
  // After torchrun exited: kills the processes of the job's own account that still hold its
  // cards (they left its process group and, unconfined, nothing else found them), unless a
  // running job of the same account owns them.
  void EndCardLeftovers(const Key& key, ProcessRecord& r);

  struct Undead {
    std::shared_ptr<JobCgroup> cgroup;
    LaunchSpec spec;  // whose it was
  };
  std::vector<Undead> undead_;  // cgroups that would not empty yet

  RunnerOptions options_;
  std::map<Key, ProcessRecord> records_;
};

}  // namespace hetpool::agent
