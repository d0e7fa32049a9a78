#include "src/agent/health_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace hetpool::agent {

namespace {

constexpr size_t kMaxOutput = 64 * 1024;  // the tail kept; a chatty program's earlier lines go

std::string LastLine(const std::string& output) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StripAsciiWhitespace(line).empty()) last = std::string(absl::StripAsciiWhitespace(line));
  }
  return last;
}

}  // namespace

HealthCheckRun RunHealthCheck(const std::string& program, absl::Duration timeout) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return {-1, absl::StrCat("pipe: ", std::strerror(errno))};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the agent blocks signals; the program must not
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  char* argv[] = {const_cast<char*>(program.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, program.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return {-1, absl::StrCat("cannot run ", program, ": ", std::strerror(spawned))};
  }
  std::string output;
  const absl::Time deadline = MonotonicNow() + timeout;
  bool timed_out = false;
  char buf[4096];
  while (true) {
    const int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - MonotonicNow()));
    if (wait_ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{out[0], POLLIN, 0};
    if (poll(&fd, 1, wait_ms) <= 0) continue;
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n <= 0) break;  // the program (and whatever it started) closed its output
    output.append(buf, static_cast<size_t>(n));
    if (output.size() > kMaxOutput) output.erase(0, output.size() - kMaxOutput);
  }
  close(out[0]);
  if (timed_out) {
    killpg(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return {-1, absl::StrCat("timed out after ", absl::FormatDuration(timeout))};
  }
  int status = 0;
  waitpid(pid, &status, 0);
  killpg(pid, SIGKILL);  // what it left in its group
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, LastLine(output)};
}

HealthCheck::HealthCheck(HealthCheckOptions options, MonotonicClock clock)
    : options_(std::move(options)), clock_(std::move(clock)) {}

HealthCheck::~HealthCheck() {
  if (worker_.joinable()) worker_.join();
}

void HealthCheck::MaybeRun() {
  if (options_.program.empty() || running_.load() || clock_() < next_run_) return;
  if (worker_.joinable()) worker_.join();  // the last run's thread, ended
  next_run_ = clock_() + options_.interval;
  running_ = true;
  worker_ = std::thread([this] {
    const HealthCheckRun run = RunHealthCheck(options_.program, options_.timeout);
    std::string failure;
    if (run.exit_code != 0) {
      failure = absl::StrCat("health check ", options_.program, " failed (",
                             run.exit_code < 0 ? "did not finish" : absl::StrCat("exit ", run.exit_code), ")",
                             run.last_line.empty() ? "" : ": ", run.last_line);
    }
    {
      absl::MutexLock lock(&mu_);
      if (failure != failure_) {
        if (failure.empty()) {
          spdlog::info("health check passes again");
        } else {
          spdlog::error("{}", failure);
        }
      }
      failure_ = failure;
    }
    ++runs_;
    running_ = false;
  });
}

std::string HealthCheck::Failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

}  // namespace hetpool::agent
