#include "src/agent/runner.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/agent/container_launch.h"
#include "src/agent/exec_args.h"
#include "src/agent/process_spawner.h"
#include "src/agent/private_tmp.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {
namespace {

// A launch that did not start: it "exits" 127 with `message` at once, and the daemon hears of
// it like any other exit. `said` comes before the message in the agent's log.
void FailLaunch(ProcessRecord& record, std::string message, absl::string_view failure, absl::string_view said = "") {
  record.exited = true;
  record.exit_code = 127;
  record.message = std::move(message);
  record.launch_failure = std::string(failure);
  spdlog::warn("job {} g{}: {}{}", record.spec.job_id, record.spec.generation, std::string(said), record.message);
}

// Opens (creating) a job's node log for appending. Its directories (g<gen>, the job's folder and
// logs/, as job_paths.h lays them out) are made the agent's alone.
int OpenAgentLog(const std::string& path) {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(dir, ec);
  for (int level = 0; level < 3 && !ec; ++level, dir = dir.parent_path()) {
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace, ec);
  }
  return open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
}

// Whether a process of `run_as` could write no byte more under `dir`: root may use the blocks
// ext4 keeps in reserve, other accounts may not.
bool DiskFull(const std::string& dir, const RunAs& run_as) {
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) != 0) return false;
  const bool as_root = !run_as.switch_user ? geteuid() == 0 : run_as.uid == 0;
  return (as_root ? fs.f_bfree : fs.f_bavail) == 0;
}

std::string Clock(absl::Time t) { return absl::FormatTime("%H:%M:%S", t, absl::UTCTimeZone()); }

}  // namespace

std::string OutputLost(const ProcessRecord& record) {
  std::vector<std::string> spans;
  for (const auto& [from, to] : record.disk_full) {
    spans.push_back(to == absl::InfiniteFuture() ? absl::StrCat("since ", Clock(from), " UTC")
                                                 : absl::StrCat("from ", Clock(from), " to ", Clock(to), " UTC"));
  }
  if (spans.empty()) return "";
  const std::string dir = std::filesystem::path(record.spec.log_path).parent_path().string();
  return absl::StrCat("output written ", absl::StrJoin(spans, ", "), " is lost: the filesystem of ", dir,
                      " had no space left");
}

namespace {

bool FullNow(const ProcessRecord& r) {
  return !r.disk_full.empty() && r.disk_full.back().second == absl::InfiniteFuture();
}

// The disk has room again, or the job ended while it was full (nothing more is lost): the log
// says so where the gap is, for `hetpoolctl logs`; if that write fails too the events say it.
void EndFullSpan(ProcessRecord& r, absl::Time now) {
  r.disk_full.back().second = now;
  const std::string line = absl::StrCat("hetpool-agent: ", OutputLost(r), "\n");
  const int fd = open(r.spec.log_path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t written = write(fd, line.data(), line.size());
  (void)written;
  close(fd);
}

}  // namespace

void Runner::WatchLogSpace() {
  const absl::Time now = absl::Now();
  for (auto& [key, r] : records_) {
    if (r.pid <= 0 || r.exited) continue;
    const std::string dir = std::filesystem::path(r.spec.log_path).parent_path().string();
    const bool full = DiskFull(dir, r.spec.run_as);
    if (full && !FullNow(r)) {
      r.disk_full.emplace_back(now, absl::InfiniteFuture());
      spdlog::error("job {} g{}: {} is full: the job's output is being lost", key.first, key.second, dir);
    } else if (!full && FullNow(r)) {
      EndFullSpan(r, now);
    }
  }
}

Runner::Runner(RunnerOptions options) : options_(std::move(options)) {
  if (options_.spawner == nullptr) options_.spawner = &ForkingSpawner();
}

void Runner::Start(const LaunchSpec& spec) {
  const Key key{spec.job_id, spec.generation};
  ProcessRecord& record = records_[key];
  record = ProcessRecord{};
  record.spec = spec;
  if (!spec.refused.empty()) return FailLaunch(record, spec.refused, spec.refused_failure, "refused: ");
  PrepareRunDir(spec);
  // The log lives where no job account can write (so nobody can swap it for a link to a file
  // the agent would then read and ship) and is opened here, by the agent, never through a link.
  const int log = OpenAgentLog(spec.log_path);
  if (log < 0) {
    return FailLaunch(record,
                      absl::StrCat(TextOf(Stage::kLogFile).says, " ", spec.log_path, ": ", std::strerror(errno)),
                      TextOf(Stage::kLogFile).failure);
  }
  if (!Confine(record)) return (void)close(log);
  // What is exec'd: torchrun as the job's account, or (in an image) the container runtime as
  // root, which starts torchrun as that account in the container. The runtime's own checks
  // stand in for the working dir and script checks, and the container has a /tmp of its own.
  std::vector<std::string> exec_argv = spec.argv;
  std::map<std::string, std::string> exec_env = spec.env;
  if (exec_argv.empty()) {
    close(log);
    DropCgroup(record);
    return FailLaunch(record, "empty argv", "LaunchFailed");
  }
  const bool in_image = spec.container.has_value();
  if (in_image) {
    const std::string cgroup = record.cgroup != nullptr ? record.cgroup->path() : "";
    if (std::string why = PrepareContainer(spec, options_.container_runtime, cgroup, exec_argv, exec_env);
        !why.empty()) {
      close(log);
      DropCgroup(record);
      return FailLaunch(record, why, "ContainerFailed");
    }
    record.runtime_argv = exec_argv;
  }
  // Everything the child needs is built before fork: after fork only async-signal-safe calls.
  const ExecArgs exec(exec_argv, exec_env);
  // What the job keeps in view of the host's /tmp, worked out before fork.
  std::unique_ptr<PrivateTmp> private_tmp;
  if (spec.private_tmp && !in_image) {
    private_tmp = std::make_unique<PrivateTmp>(spec.keep_in_tmp, spec.private_shm, spec.limits.memory_mib);
  }
  const std::string start_dir = in_image ? "/" : spec.working_dir;
  const ChildPlan plan{.private_tmp = private_tmp.get(),
                       .run_as = &spec.run_as,
                       .switch_user = spec.run_as.switch_user && !in_image,
                       .start_dir = start_dir.c_str(),
                       .script = in_image || spec.script.empty() ? nullptr : spec.script.c_str(),
                       .log = log,
                       .exec = &exec};
  Launch(key, record, plan, exec_argv[0]);
}

void Runner::PrepareRunDir(const LaunchSpec& spec) {
  std::error_code ec;
  const std::filesystem::path run_dir = spec.run_dir;
  std::filesystem::create_directories(run_dir, ec);
  const RunAs& run_as = spec.run_as;
  // The run directory is the job account's alone (0700): another user's job cannot read or
  // write into it, whatever account it runs as.
  if (run_as.switch_user &&
      (chown(run_dir.c_str(), run_as.uid, run_as.gid) != 0 || chmod(run_dir.c_str(), 0700) != 0)) {
    spdlog::warn("job {} g{}: chown {}: {}", spec.job_id, spec.generation, run_dir.string(), std::strerror(errno));
  }
}

bool Runner::Confine(ProcessRecord& record) {
  // The generation's cgroup exists before its first process: nothing of it runs unconfined.
  if (options_.confinement == nullptr) return true;
  const LaunchSpec& spec = record.spec;
  auto cgroup = options_.confinement->Create(absl::StrCat(spec.job_id, "-g", spec.generation), spec.limits);
  if (!cgroup.ok()) {
    FailLaunch(record, absl::StrCat("not started: the agent cannot confine the launch: ", cgroup.status().message()),
               "LaunchFailed");
    return false;
  }
  record.cgroup = std::move(*cgroup);
  record.confinement = absl::StrCat(options_.confinement->version() == CgroupVersion::kV1 ? "cgroup v1" : "cgroup v2",
                                    record.cgroup->description().empty() ? "" : ": ", record.cgroup->description());
  return true;
}

void Runner::DropCgroup(ProcessRecord& record) {
  if (record.cgroup != nullptr) record.cgroup->Remove().IgnoreError();
  record.cgroup = nullptr;
}

void Runner::Launch(const Key& key, ProcessRecord& record, const ChildPlan& plan, const std::string& program) {
  const LaunchSpec& spec = record.spec;
  // In its cgroup, then in the ledger, before the child may exec: a process of the job is
  // always where the agent (or its successor) will look for it.
  absl::Status confined = absl::OkStatus(), recorded = absl::OkStatus();
  const Spawned spawned = options_.spawner->Spawn(plan, [&](pid_t pid) {
    confined = record.cgroup != nullptr ? record.cgroup->Add(pid) : absl::OkStatus();
    recorded = !confined.ok()               ? confined
               : options_.ledger != nullptr ? options_.ledger->Add(pid, spec.job_id, spec.generation)
                                            : absl::OkStatus();
    return recorded;
  });
  if (spawned.pid < 0) {
    DropCgroup(record);
    return FailLaunch(record, spawned.error, "LaunchFailed");
  }
  record.pid = spawned.pid;
  if (!spawned.stopped) {
    if (options_.watchdog != nullptr) options_.watchdog->Watch(spawned.pid);
    if (spec.direct) record.global_ranks = {0};  // the job's one process: rank 0, local rank 0
    spdlog::info("job {} g{}: started pid {}", spec.job_id, spec.generation, spawned.pid);
    return;
  }
  const ChildError err = *spawned.stopped;
  const std::string what = err.stage == Stage::kWorkingDir   ? spec.working_dir
                           : err.stage == Stage::kLogFile    ? spec.log_path
                           : err.stage == Stage::kAccount    ? spec.run_as.account
                           : err.stage == Stage::kScript     ? absl::StrCat(spec.script, " in ", spec.working_dir)
                           : err.stage == Stage::kPrivateTmp ? "(a tmpfs in a mount namespace of its own)"
                                                             : program;
  std::string message = err.stage == Stage::kNotRecorded && !confined.ok()
                            ? absl::StrCat("not started: the agent cannot confine the launch: ", confined.message())
                        : err.stage == Stage::kNotRecorded
                            ? absl::StrCat(TextOf(err.stage).says, ": ", recorded.message())
                            : absl::StrCat(TextOf(err.stage).says, " ", what, ": ", std::strerror(err.error));
  if (options_.ledger != nullptr && recorded.ok()) options_.ledger->Remove(spawned.pid);
  if (record.cgroup != nullptr) EndCgroup(key, record);
  if (spec.container.has_value()) EndContainer(spec, options_.container_runtime);
  FailLaunch(record, std::move(message), TextOf(err.stage).failure);
}

void Runner::Kill(const Key& key, const std::string& reason, absl::Duration grace) {
  auto it = records_.find(key);
  if (it == records_.end() || it->second.exited || it->second.kill_sent) return;
  ProcessRecord& r = it->second;
  r.kill_sent = true;
  r.kill_sent_at = options_.clock();
  r.kill_reason = reason;
  r.kill_grace = grace > absl::ZeroDuration() ? grace : options_.kill_grace;
  spdlog::info("job {} g{}: stopping pid {} ({}; SIGKILL after {})", key.first, key.second, r.pid, reason,
               absl::FormatDuration(r.kill_grace));
  options_.spawner->SignalGroup(r.pid, SIGTERM);
  // And what left the group (setsid, a new process group): it gets the same grace.
  if (r.cgroup != nullptr) r.cgroup->SignalAll(SIGTERM);
}

bool Runner::StopLingering(absl::Duration grace) {
  bool stopped = false;
  const absl::Time now = options_.clock();
  for (auto& [key, r] : records_) {
    if (r.exited || r.kill_sent || r.spec.direct) continue;  // no torchrun to linger
    if (r.rank_failed_at == absl::InfiniteFuture()) {
      if (r.log_tail.find("failed (exitcode:") == std::string::npos) continue;  // the cheap look first
      if (!ParseFirstWorkerFailure(r.log_tail, r.global_ranks)) continue;
      r.rank_failed_at = now;
    }
    if (now - r.rank_failed_at < grace) continue;
    const auto failure = ParseFirstWorkerFailure(r.log_tail, r.global_ranks);
    const std::string rank = failure && failure->global_rank >= 0 ? absl::StrCat("rank ", failure->global_rank)
                             : failure                            ? absl::StrCat("local rank ", failure->local_rank)
                                                                  : std::string("a rank");
    Kill(key, absl::StrCat(rank, " failed and torchrun had not exited ", absl::FormatDuration(grace),
                           " later (it waits at its exit barrier for the other nodes, whose ranks may wait on the "
                           "failed one): the rest of the generation was stopped"));
    r.stopped_after_rank_failure = true;
    stopped = true;
  }
  return stopped;
}

void Runner::KillAll(const std::string& reason) {
  for (auto& [key, r] : records_) Kill(key, reason);
}

bool Runner::Poll() {
  WatchLogSpace();
  bool any = false;
  for (auto& [key, r] : records_) {
    if (r.exited || r.pid <= 0) continue;
    if (const std::optional<int> reaped = options_.spawner->Reap(r.pid)) {
      const int status = *reaped;
      r.exited = true;
      any = true;
      if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        r.signal = WTERMSIG(status);
        r.exit_code = 128 + r.signal;
        r.message = absl::StrCat("killed by signal ", WTERMSIG(status));
      }
      if (r.kill_sent) r.message = absl::StrCat("stopped: ", r.kill_reason);
      if (FullNow(r)) EndFullSpan(r, absl::Now());
      // Ranks orphaned by a crashed torchrun are still in the group: take them down too; and
      // with a cgroup, everything the job started, wherever it went.
      options_.spawner->SignalGroup(r.pid, SIGKILL);
      if (r.cgroup != nullptr) EndCgroup(key, r);
      if (r.spec.container) EndContainer(r.spec, options_.container_runtime);
      EndCardLeftovers(key, r);
      if (options_.ledger != nullptr) options_.ledger->Remove(r.pid);
      if (options_.watchdog != nullptr) options_.watchdog->Forget(r.pid);
      spdlog::info("job {} g{}: pid {} exited with code {}", key.first, key.second, r.pid, r.exit_code);
      continue;
    }
    if (r.global_ranks.empty() && r.spec.procs > 0) {
      // torchrun's workers are the members of the job's cgroup (in an image the runtime's
      // grandchildren, in another process group): read from cgroup.procs, not a scan of every
      // process on the node. Unconfined, its process group is looked for in /proc.
      r.global_ranks = r.cgroup != nullptr ? options_.spawner->RanksOf(r.cgroup->Processes(), r.spec.procs)
                                           : options_.spawner->RanksInGroup(r.pid, r.spec.procs);
      any = any || !r.global_ranks.empty();
    }
    if (r.kill_sent && options_.clock() - r.kill_sent_at > r.kill_grace) {
      options_.spawner->SignalGroup(r.pid, SIGKILL);
      if (r.cgroup != nullptr) r.cgroup->SignalAll(SIGKILL);
    }
  }
  std::erase_if(undead_, [](const Undead& undead) {
    return undead.cgroup->KillAll(absl::ZeroDuration()).ok() && undead.cgroup->Remove().ok();
  });
  return any;
}

void Runner::EndCgroup(const Key& key, ProcessRecord& r) {
  std::shared_ptr<JobCgroup> cgroup = std::move(r.cgroup);
  auto killed = cgroup->KillAll(absl::Seconds(5));
  if (killed.ok()) {
    r.strays_killed = *killed;
    if (*killed > 0) {
      spdlog::warn("job {} g{}: killed {} process(es) the job left running", key.first, key.second, *killed);
    }
  } else {
    spdlog::error("job {} g{}: {}", key.first, key.second, std::string(killed.status().message()));
  }
  // The kernel killed a process at the limit: the job's exit is that, whatever torchrun says.
  if (cgroup->OomKills() > 0 && cgroup->limits().memory_mib > 0) r.out_of_memory_mib = cgroup->limits().memory_mib;
  if (!killed.ok() || !cgroup->Remove().ok()) undead_.push_back(Undead{std::move(cgroup), r.spec});
}

namespace {

// The job's own account, when it has one (root and the agent's account are everybody's).
std::optional<uid_t> OwnAccount(const LaunchSpec& spec) {
  if (!spec.run_as.switch_user || spec.run_as.uid == 0) return std::nullopt;
  return spec.run_as.uid;
}

}  // namespace

std::vector<JobOwnership> Runner::RunningJobs() const {
  std::vector<JobOwnership> jobs;
  for (const auto& [key, r] : records_) {
    if (r.exited || r.pid <= 0) continue;
    JobOwnership job{absl::StrCat(key.first, " g", key.second), r.pid, {}, OwnAccount(r.spec), r.spec.device_ids};
    if (r.cgroup != nullptr) {
      for (pid_t pid : r.cgroup->Processes()) job.cgroup_members.insert(pid);
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

void Runner::EndCardLeftovers(const Key& key, ProcessRecord& r) {
  if (!options_.card_processes || r.spec.device_ids.empty() || !OwnAccount(r.spec)) return;
  // Its process group was killed already: only what left the group is looked for, by account.
  const std::vector<JobOwnership> ended = {
      JobOwnership{absl::StrCat(key.first, " g", key.second), 0, {}, OwnAccount(r.spec), r.spec.device_ids}};
  const std::vector<JobOwnership> running = RunningJobs();
  for (const auto& [device_id, process] : options_.card_processes()) {
    if (std::find(r.spec.device_ids.begin(), r.spec.device_ids.end(), device_id) == r.spec.device_ids.end()) continue;
    const ProcessFacts facts = ReadProcessFacts(process.pid);
    if (OwnerOf(process.pid, facts, device_id, running) != nullptr) continue;  // a running job's
    if (OwnerOf(process.pid, facts, device_id, ended) == nullptr) continue;    // a stranger: the card is dirty
    if (!KillIfStill(process.pid, facts)) continue;
    r.card_leftovers.push_back(absl::StrCat(DescribeHolder(process, facts), " of ", device_id));
    spdlog::warn("job {} g{}: killed {}, left on its card", key.first, key.second, r.card_leftovers.back());
  }
}

std::string Runner::UidHolder(uid_t uid, const std::string& user) const {
  if (uid == 0) return "";
  auto holds = [&](const LaunchSpec& spec) {
    return spec.run_as.switch_user && spec.run_as.uid == uid && spec.user != user;
  };
  for (const auto& [key, r] : records_) {
    // Exited and its cgroup emptied: nothing of it lives. Unconfined, an exited job's strays
    // are not seen (docs/security.md says what --confine off gives up).
    if (holds(r.spec) && (!r.exited || r.cgroup != nullptr)) {
      return absl::StrCat(key.first, " g", key.second, " of ", r.spec.user);
    }
  }
  for (const Undead& undead : undead_) {
    if (holds(undead.spec))
      return absl::StrCat(undead.spec.job_id, " g", undead.spec.generation, " of ", undead.spec.user);
  }
  return "";
}

bool Runner::AnyRunning() const {
  for (const auto& [key, r] : records_) {
    if (!r.exited) return true;
  }
  return false;
}

}  // namespace hetpool::agent
