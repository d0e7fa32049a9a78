#include "src/agent/process_spawner.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "src/agent/private_tmp.h"

namespace hetpool::agent {

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

namespace {

// The child's side. `go`: read, the parent's byte once the group is recorded; `report`: write, a
// ChildError (closed by a successful exec).
[[noreturn]] void RunChild(const ChildPlan& plan, int go, int report) {
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
  } else if (plan.switch_user && (setgroups(plan.run_as->groups.size(), plan.run_as->groups.data()) != 0 ||
                                  setgid(plan.run_as->gid) != 0 || setuid(plan.run_as->uid) != 0)) {
    err = {Stage::kAccount, errno};
  } else if (chdir(plan.start_dir) != 0) {
    err = {Stage::kWorkingDir, errno};
  } else if (plan.script != nullptr && access(plan.script, R_OK) != 0) {
    err = {Stage::kScript, errno};
  } else {
    char byte = 0;
    ssize_t got;
    do {
      got = read(go, &byte, 1);
    } while (got < 0 && errno == EINTR);
    if (got != 1) {
      err = {Stage::kNotRecorded, 0};
    } else {
      dup2(null, 0);  // dup2 clears close-on-exec on the copies
      dup2(plan.log, 1);
      dup2(plan.log, 2);
      // execvp's order: a candidate that is not there (or not a directory on the way) passes
      // to the next; one that cannot be run is remembered, and said if no later one runs.
      int error = ENOENT;
      for (size_t i = 0; i < plan.exec->candidates(); ++i) {
        execve(plan.exec->candidate(i), plan.exec->argv(), plan.exec->envp());
        if (errno == EACCES) error = EACCES;
        if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) {
          error = errno;
          break;
        }
      }
      err = {Stage::kExec, error};
    }
  }
  ssize_t ignored = write(report, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

class Forking : public ProcessSpawner {
 public:
  Spawned Spawn(const ChildPlan& plan, const std::function<absl::Status(pid_t)>& admit) override {
    // report_fds: the child's report of why it could not exec (closed by a successful exec).
    // go_fds: the parent's word that the group is admitted; the child execs nothing before it.
    int report_fds[2] = {-1, -1};
    int go_fds[2] = {-1, -1};
    if (pipe2(report_fds, O_CLOEXEC) != 0 || pipe2(go_fds, O_CLOEXEC) != 0) {
      Spawned failed{.error = absl::StrCat("pipe: ", std::strerror(errno))};
      for (int fd : {report_fds[0], report_fds[1]}) {
        if (fd >= 0) close(fd);
      }
      close(plan.log);
      return failed;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(go_fds[1]);  // else the child's read would never see the parent give up
      RunChild(plan, go_fds[0], report_fds[1]);
    }
    close(report_fds[1]);
    close(go_fds[0]);
    close(plan.log);  // the child holds its copies
    if (pid < 0) {
      close(report_fds[0]);
      close(go_fds[1]);
      return Spawned{.error = absl::StrCat("fork: ", std::strerror(errno))};
    }
    setpgid(pid, pid);  // also here, so a kill right after Spawn reaches the group
    if (admit(pid).ok()) {
      const char go = 1;
      // The child may have stopped already (a bad working dir): then this write fails with
      // EPIPE (SIGPIPE is blocked in the agent) and the report below says why.
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
    Spawned spawned{.pid = pid};
    if (n == static_cast<ssize_t>(sizeof(err))) {  // else the report pipe closed on exec: it runs
      waitpid(pid, nullptr, 0);
      spawned.stopped = err;
    }
    return spawned;
  }

  std::optional<int> Reap(pid_t pid) override {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
    return status;
  }

  void SignalGroup(pid_t pgid, int signal) override { killpg(pgid, signal); }

  std::vector<int> RanksOf(const std::vector<pid_t>& pids, int procs) override {
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

  std::vector<int> RanksInGroup(pid_t pgid, int procs) override {
    std::vector<pid_t> members;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      if (pid != pgid && getpgid(pid) == pgid) members.push_back(pid);
    }
    return RanksOf(members, procs);
  }
};

}  // namespace

ProcessSpawner& ForkingSpawner() {
  static Forking* spawner = new Forking();
  return *spawner;
}

}  // namespace hetpool::agent
