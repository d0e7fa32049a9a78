#include "src/agent/health_check.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"
#include "src/agent/program_run.h"

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
  const ProgramOutput run =
      RunProgram({program}, timeout, {.with_stderr = true, .keep_bytes = kMaxOutput, .keep_tail = true});
  switch (run.end) {
    case ProgramOutput::End::kNotStarted: return {-1, run.error};
    case ProgramOutput::End::kTimedOut: return {-1, absl::StrCat("timed out after ", absl::FormatDuration(timeout))};
    case ProgramOutput::End::kExited: break;
  }
  return {run.exit_code, LastLine(run.output)};
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
