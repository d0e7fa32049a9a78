#include "src/agent/health_check.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"
#include "src/agent/program_run.h"

namespace hetpool::agent {

namespace {

constexpr size_t kMaxOutput = 64 * 1024;  // the tail kept; a chatty program's earlier lines go
constexpr absl::Duration kForgetWaitingAfter = absl::Hours(1);
constexpr size_t kMaxPassedJobs = 4096;  // jobs whose later generations here skip the check

std::string LastLine(const std::string& output) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StripAsciiWhitespace(line).empty()) last = std::string(absl::StripAsciiWhitespace(line));
  }
  return last;
}

}  // namespace

HealthCheckRun RunHealthCheck(const std::string& program, absl::Duration timeout, const std::string& occasion) {
  // The agent's environment, and why this run (a program may check less before a launch).
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != absl::string_view::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  env["HETPOOL_HEALTH_CHECK"] = occasion;
  const ProgramOutput run = RunProgram(
      {program}, timeout, {.env = std::move(env), .with_stderr = true, .keep_bytes = kMaxOutput, .keep_tail = true});
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
  StartRun("interval");
}

void HealthCheck::StartRun(const std::string& occasion) {
  if (worker_.joinable()) worker_.join();  // the last run's thread, ended
  const absl::Time began = clock_();
  next_run_ = began + options_.interval;
  running_ = true;
  worker_ = std::thread([this, began, occasion] {
    const absl::Time wall_start = absl::Now();
    const HealthCheckRun run = RunHealthCheck(options_.program, options_.timeout, occasion);
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
        verdict_changed_ = true;
      }
      failure_ = failure;
      failed_line_ = failure.empty() ? "" : run.last_line;
      last_began_ = began;
      last_took_ = absl::Now() - wall_start;
    }
    ++runs_;
    running_ = false;
  });
}

PreflightVerdict HealthCheck::Preflight(const std::string& job_id, const std::vector<std::string>& job_devices,
                                        const std::vector<std::string>& node_devices) {
  using State = PreflightVerdict::State;
  if (!options_.preflight || options_.program.empty()) return {};
  if (preflight_passed_.contains(job_id)) return {State::kPassed, ""};
  const absl::Time now = clock_();
  // A launch the daemon took back while it waited leaves its entry: forgotten in time.
  std::erase_if(preflight_asked_, [&](const auto& entry) { return entry.second < now - kForgetWaitingAfter; });
  const absl::Time asked = preflight_asked_.try_emplace(job_id, now).first->second;
  std::string failure, line;
  absl::Duration took;
  bool ended = false;
  {
    absl::MutexLock lock(&mu_);
    if (last_began_ >= asked) {
      ended = true;
      failure = failure_;
      line = failed_line_;
      took = last_took_;
    }
  }
  if (!ended) {
    if (!running_.load()) StartRun("preflight");
    return {State::kRunning, "pre-flight health check running"};
  }
  preflight_asked_.erase(job_id);
  // A failure naming other cards of the node than the job's does not hold its launch back.
  const std::vector<std::string> named = CardsNamedBy(line, node_devices);
  const bool on_its_cards = named.empty() || std::any_of(named.begin(), named.end(), [&](const std::string& card) {
                              return std::find(job_devices.begin(), job_devices.end(), card) != job_devices.end();
                            });
  if (!failure.empty() && on_its_cards) return {State::kFailed, absl::StrCat("pre-flight ", failure)};
  if (preflight_passed_.size() >= kMaxPassedJobs) preflight_passed_.erase(preflight_passed_.begin());
  preflight_passed_.insert(job_id);
  return {State::kPassed, absl::StrCat("pre-flight health check passed in ",
                                       absl::FormatDuration(absl::Trunc(took, absl::Milliseconds(1))),
                                       failure.empty() ? "" : absl::StrCat(" for its cards (", failure, ")"))};
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
