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
#include "src/agent/private_tmp.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {
namespace {

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

StageText TextOf(Stage stage) {
  switch (stage) {
    case Stage::kWorkingDir: return {"cannot enter working_dir", "WorkingDirNotFound"};
    case Stage::kLogFile: return {"cannot open log file", "LaunchFailed"};
    case Stage::kExec: return {"cannot execute", "LaunchFailed"};
    case Stage::kAccount: return {"cannot switch to account", "LaunchFailed"};
    case Stage::kScript: return {"ScriptNotFound: cannot read script", "ScriptNotFound"};
    case Stage::kNotRecorded: return {"not started: the agent cannot record the launch", "LaunchFailed"};
    case Stage::kPrivateTmp: return {"cannot make the job's private /tmp", "LaunchFailed"};
  }
  return {"cannot start", "LaunchFailed"};
}

// A launch that did not start: it "exits" 127 with `message` at once, and the daemon hears of
// it like any other exit. `said` comes before the message in the agent's log.
void FailLaunch(ProcessRecord& record, std::string message, absl::string_view failure, absl::string_view said = "") {
  record.exited = true;
  record.exit_code = 127;
  record.message = std::move(message);
  record.launch_failure = std::string(failure);
  spdlog::warn("job {} g{}: {}{}", record.spec.job_id, record.spec.generation, std::string(said), record.message);
}

}  // namespace

// What the forked child does, all of it made before the fork: after it, only async-signal-safe
// calls. Its own /tmp (as root, first), the job's account, the working dir, the script's check
// (as that account, where torchrun would open it), then the parent's word that the group is
// recorded, then exec. Anything that fails is reported through `report` and the child exits.
struct ChildPlan {
  PrivateTmp* private_tmp = nullptr;
  const RunAs* run_as = nullptr;
  bool switch_user = false;
  const char* start_dir = nullptr;
  const char* script = nullptr;  // null: nothing to check
  int log = -1;
  int go = -1;      // read: the parent's byte once the group is in the ledger
  int report = -1;  // write: a ChildError
  const ExecArgs* exec = nullptr;
};

namespace {

[[noreturn]] void RunChild(const ChildPlan& plan) {
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the agent blocks signals; the job must not
  signal(SIGPIPE, SIG_DFL);
  ChildError err{Stage::kWorkingDir, 0};
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int tmp_error = 0;
  if (plan.private_tmp != nullptr && (tmp_error = plan.private_tmp->EnterInChild()) != 0) {
    err = {Stage::kPrivateTmp, tmp_error};
  } else if (plan.switch_user &&
             (setgroups(plan.run_as->groups.size(), plan.run_as->groups.data()) != 0 ||
              setgid(plan.run_as->gid) != 0 || setuid(plan.run_as->uid) != 0)) {
    err = {Stage::kAccount, errno};
  } else if (chdir(plan.start_dir) != 0) {
    err = {Stage::kWorkingDir, errno};
  } else if (plan.script != nullptr && access(plan.script, R_OK) != 0) {
    err = {Stage::kScript, errno};
  } else {
    char go = 0;
    ssize_t got;
    do {
      got = read(plan.go, &go, 1);
    } while (got < 0 && errno == EINTR);
    if (got != 1) {
      err = {Stage::kNotRecorded, 0};
    } else {
      dup2(null, 0);  // dup2 clears close-on-exec on the copies
      dup2(plan.log, 1);
      dup2(plan.log, 2);
      execve(plan.exec->path(), plan.exec->argv(), plan.exec->envp());
      err = {Stage::kExec, errno};
    }
  }
  ssize_t ignored = write(plan.report, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// Reads RANK and LOCAL_RANK of torchrun's workers (members of the job's process group) from
// /proc: with c10d rendezvous the global ranks are only known once the workers exist.
// Each worker's RANK by its LOCAL_RANK, read from the environments of `pids`; empty until all
// `procs` are seen.
std::vector<int> DiscoverRanks(const std::vector<pid_t>& pids, int procs) {
  std::vector<int> ranks(static_cast<size_t>(procs), -1);
  int found = 0;
  for (pid_t pid : pids) {
    std::ifstream environ(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
    std::string var;
    int rank = -1, local = -1;
    while (std::getline(environ, var, '\0')) {
      if (var.rfind("RANK=", 0) == 0) rank = std::atoi(var.c_str() + 5);
      if (var.rfind("LOCAL_RANK=", 0) == 0) local = std::atoi(var.c_str() + 11);
    }
    if (rank >= 0 && local >= 0 && local < procs && ranks[static_cast<size_t>(local)] < 0) {
      ranks[static_cast<size_t>(local)] = rank;
      ++found;
    }
  }
  if (found < procs) return {};
  return ranks;
}

// The same for the members of process group `pgid` (torchrun's workers), torchrun itself aside.
std::vector<int> DiscoverRanks(pid_t pgid, int procs) {
  std::vector<pid_t> members;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid != pgid && getpgid(pid) == pgid) members.push_back(pid);
  }
  return DiscoverRanks(members, procs);
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
    return FailLaunch(record, absl::StrCat(TextOf(Stage::kLogFile).says, " ", spec.log_path, ": ", std::strerror(errno)),
                      TextOf(Stage::kLogFile).failure);
  }
  if (!Confine(record)) return (void)close(log);
  // What is exec'd: torchrun as the job's account, or (in an image) the container runtime as
  // root, which starts torchrun as that account in the container. The runtime's own checks
  // stand in for the working dir and script checks, and the container has a /tmp of its own.
  std::vector<std::string> exec_argv = spec.argv;
  std::map<std::string, std::string> exec_env = spec.env;
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
  ChildPlan plan{.private_tmp = private_tmp.get(),
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
  if (run_as.switch_user && (chown(run_dir.c_str(), run_as.uid, run_as.gid) != 0 || chmod(run_dir.c_str(), 0700) != 0)) {
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

void Runner::Launch(const Key& key, ProcessRecord& record, ChildPlan& plan, const std::string& program) {
  const LaunchSpec& spec = record.spec;
  // report_fds: the child's report of why it could not exec (closed by a successful exec).
  // go_fds: the parent's word that the group is in the ledger; the child execs nothing before
  // it, so no job code runs that a restarted agent would not know to stop.
  int report_fds[2] = {-1, -1};
  int go_fds[2] = {-1, -1};
  const bool piped = !spec.argv.empty() && pipe2(report_fds, O_CLOEXEC) == 0 && pipe2(go_fds, O_CLOEXEC) == 0;
  if (!piped) {
    const std::string why = spec.argv.empty() ? "empty argv" : absl::StrCat("pipe: ", std::strerror(errno));
    for (int fd : {report_fds[0], report_fds[1]}) {
      if (fd >= 0) close(fd);
    }
    close(plan.log);
    return FailLaunch(record, why, "LaunchFailed");
  }
  plan.go = go_fds[0];
  plan.report = report_fds[1];
  const pid_t pid = fork();
  if (pid == 0) {
    close(go_fds[1]);  // else the child's read would never see the parent give up
    RunChild(plan);
  }
  close(report_fds[1]);
  close(go_fds[0]);
  close(plan.log);  // the child holds its copies
  if (pid < 0) {
    close(report_fds[0]);
    close(go_fds[1]);
    DropCgroup(record);
    return FailLaunch(record, absl::StrCat("fork: ", std::strerror(errno)), "LaunchFailed");
  }
  setpgid(pid, pid);  // also here, so a kill right after Start reaches the group
  // In its cgroup, then in the ledger, before the child may exec: a process of the job is
  // always where the agent (or its successor) will look for it.
  const absl::Status confined = record.cgroup != nullptr ? record.cgroup->Add(pid) : absl::OkStatus();
  const absl::Status recorded = !confined.ok()               ? confined
                                : options_.ledger != nullptr ? options_.ledger->Add(pid, spec.job_id, spec.generation)
                                                             : absl::OkStatus();
  if (recorded.ok()) {
    const char go = 1;
    // The child may have stopped already (a bad working dir): then this write fails with EPIPE
    // (SIGPIPE is blocked in the agent) and the report below says why.
    ssize_t sent = write(go_fds[1], &go, 1);
    (void)sent;
  }
  close(go_fds[1]);  // without the byte: the child exits, reporting kNotRecorded
  ChildError err{};
  ssize_t n;
  do {
    n = read(report_fds[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(report_fds[0]);
  record.pid = pid;
  if (n != static_cast<ssize_t>(sizeof(err))) {  // the report pipe closed on exec: it runs
    if (options_.watchdog != nullptr) options_.watchdog->Watch(pid);
    spdlog::info("job {} g{}: started pid {}", spec.job_id, spec.generation, pid);
    return;
  }
  waitpid(pid, nullptr, 0);
  const std::string what = err.stage == Stage::kWorkingDir  ? spec.working_dir
                           : err.stage == Stage::kLogFile   ? spec.log_path
                           : err.stage == Stage::kAccount   ? spec.run_as.account
                           : err.stage == Stage::kScript    ? absl::StrCat(spec.script, " in ", spec.working_dir)
                           : err.stage == Stage::kPrivateTmp ? "(a tmpfs in a mount namespace of its own)"
                                                            : program;
  std::string message =
      err.stage == Stage::kNotRecorded && !confined.ok()
          ? absl::StrCat("not started: the agent cannot confine the launch: ", confined.message())
      : err.stage == Stage::kNotRecorded ? absl::StrCat(TextOf(err.stage).says, ": ", recorded.message())
                                         : absl::StrCat(TextOf(err.stage).says, " ", what, ": ", std::strerror(err.error));
  if (options_.ledger != nullptr && recorded.ok()) options_.ledger->Remove(pid);
  if (record.cgroup != nullptr) EndCgroup(key, record);
  if (spec.container.has_value()) EndContainer(spec, options_.container_runtime);
  FailLaunch(record, std::move(message), TextOf(err.stage).failure);
}

void Runner::Kill(const Key& key, const std::string& reason, absl::Duration grace) {
  auto it = records_.find(key);
  if (it == records_.end() || it->second.exited || it->second.kill_sent) return;
  ProcessRecord& r = it->second;
  r.kill_sent = true;
  r.kill_sent_at = MonotonicNow();
  r.kill_reason = reason;
  r.kill_grace = grace > absl::ZeroDuration() ? grace : options_.kill_grace;
  spdlog::info("job {} g{}: stopping pid {} ({}; SIGKILL after {})", key.first, key.second, r.pid, reason,
               absl::FormatDuration(r.kill_grace));
  killpg(r.pid, SIGTERM);
  // And what left the group (setsid, a new process group): it gets the same grace.
  if (r.cgroup != nullptr) r.cgroup->SignalAll(SIGTERM);
}

void Runner::KillAll(const std::string& reason) {
  for (auto& [key, r] : records_) Kill(key, reason);
}

bool Runner::Poll() {
  WatchLogSpace();
  bool any = false;
  for (auto& [key, r] : records_) {
    if (r.exited || r.pid <= 0) continue;
    int status = 0;
    const pid_t done = waitpid(r.pid, &status, WNOHANG);
    if (done == r.pid) {
      r.exited = true;
      any = true;
      if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        r.exit_code = 128 + WTERMSIG(status);
        r.message = absl::StrCat("killed by signal ", WTERMSIG(status));
      }
      if (r.kill_sent) r.message = absl::StrCat("stopped: ", r.kill_reason);
      if (FullNow(r)) EndFullSpan(r, absl::Now());
      // Ranks orphaned by a crashed torchrun are still in the group: take them down too; and
      // with a cgroup, everything the job started, wherever it went.
      killpg(r.pid, SIGKILL);
      if (r.cgroup != nullptr) EndCgroup(key, r);
      if (r.spec.container) EndContainer(r.spec, options_.container_runtime);
      EndCardLeftovers(key, r);
      if (options_.ledger != nullptr) options_.ledger->Remove(r.pid);
      if (options_.watchdog != nullptr) options_.watchdog->Forget(r.pid);
      spdlog::info("job {} g{}: pid {} exited with code {}", key.first, key.second, r.pid, r.exit_code);
      continue;
    }
    if (r.global_ranks.empty() && r.spec.procs > 0) {
      // In an image, torchrun's workers are the runtime's grandchildren in another process
      // group, but in the job's cgroup all the same.
      r.global_ranks = r.spec.container && r.cgroup != nullptr ? DiscoverRanks(r.cgroup->Processes(), r.spec.procs)
                                                               : DiscoverRanks(r.pid, r.spec.procs);
      any = any || !r.global_ranks.empty();
    }
    if (r.kill_sent && MonotonicNow() - r.kill_sent_at > r.kill_grace) {
      killpg(r.pid, SIGKILL);
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
    if (holds(undead.spec)) return absl::StrCat(undead.spec.job_id, " g", undead.spec.generation, " of ", undead.spec.user);
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
