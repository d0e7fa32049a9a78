#include "src/agent/health_check.h"

#include <algorithm>

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

std::vector<std::string> CardsNamedBy(const std::string& last_line, const std::vector<std::string>& device_ids) {
  const size_t colon = last_line.find(':');
  if (colon == std::string::npos) return {};
  std::vector<std::string> named;
  for (absl::string_view word : absl::StrSplit(last_line.substr(0, colon), absl::ByAnyChar(", "), absl::SkipEmpty())) {
    if (std::find(device_ids.begin(), device_ids.end(), word) == device_ids.end()) return {};
    named.emplace_back(word);
  }
  return named;
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
      failed_line_ = failure.empty() ? "" : run.last_line;
    }
    ++runs_;
    running_ = false;
  });
}

std::string HealthCheck::Failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

std::string HealthCheck::NodeFailure(const std::vector<std::string>& device_ids) const {
  absl::MutexLock lock(&mu_);
  return CardsNamedBy(failed_line_, device_ids).empty() ? failure_ : "";
}

void HealthCheck::BlameNamedCards(std::vector<DeviceRecord>& devices) const {
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    line = failed_line_;
  }
  if (line.empty()) return;
  std::vector<std::string> ids;
  for (const DeviceRecord& d : devices) ids.push_back(d.id);
  const std::vector<std::string> named = CardsNamedBy(line, ids);
  for (DeviceRecord& d : devices) {
    if (std::find(named.begin(), named.end(), d.id) == named.end()) continue;
    d.signals.push_back({Severity::kFatal, absl::StrCat(options_.program, ": ", line), "health-check"});
    if (d.healthy) d.health_message = absl::StrCat("fatal: health check: ", line);
    d.healthy = false;
  }
}

}  // namespace hetpool::agent
