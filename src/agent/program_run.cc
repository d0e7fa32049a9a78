#include "src/agent/program_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/agent/exec_args.h"
#include "src/common/monotonic_clock.h"

extern char** environ;

namespace hetpool::agent {

ProgramOutput RunProgram(const std::vector<std::string>& args, absl::Duration patience,
                         const ProgramRunOptions& options) {
  ProgramOutput result;
  if (args.empty()) {
    result.error = "no program";
    return result;
  }
  // argv and envp made before the spawn (ExecArgs); the agent's own environment when none is given.
  const ExecArgs exec(args, options.env.value_or(std::map<std::string, std::string>{}));
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    result.error = absl::StrCat("pipe: ", std::strerror(errno));
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  if (options.with_stderr) {
    posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  } else {
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, exec.path(), &actions, &attr, exec.argv(), options.env ? exec.envp() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    result.error = absl::StrCat("cannot run ", args[0], ": ", std::strerror(spawned));
    return result;
  }
  const absl::Time deadline = MonotonicNow() + patience;
  bool timed_out = false;
  char buf[4096];
  while (true) {
    const int wait_ms = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - MonotonicNow())));
    pollfd p{out[0], POLLIN, 0};
    const int ready = poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = true;
      break;
    }
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the program (and whatever it started) closed its output
    if (options.keep_tail) {
      result.output.append(buf, static_cast<size_t>(n));
      if (result.output.size() > options.keep_bytes) {
        result.output.erase(0, result.output.size() - options.keep_bytes);
      }
    } else if (result.output.size() < options.keep_bytes) {
      result.output.append(buf, static_cast<size_t>(n));
    }
  }
  close(out[0]);
  if (timed_out) killpg(pid, SIGKILL);
  // Once it has exited, but before it is reaped (so its pid, the group's id, cannot be reused
  // meanwhile), whatever it left running in its group goes too.
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  killpg(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    result.end = ProgramOutput::End::kTimedOut;
    return result;
  }
  result.end = ProgramOutput::End::kExited;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace hetpool::agent
