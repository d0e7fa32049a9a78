#include "src/agent/process_ledger.h"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"
#include "src/common/durable_file.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {
namespace {

// Field 22 of /proc/PID/stat (clock ticks after boot); 0 when the process is gone.
unsigned long long StartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 2), ' ');
  unsigned long long start = 0;
  // After "pid (comm) ", fields are numbered from 3: start time (22) is index 19.
  if (fields.size() > 19 && absl::SimpleAtoi(fields[19], &start)) return start;
  return 0;
}

bool GroupExists(pid_t pgid) { return killpg(pgid, 0) == 0; }

// Every live process (not this one) whose environment holds exactly `marker` ("NAME=VALUE").
// /proc/PID/environ is the kernel's copy of what the process was started with: a job process
// cannot swap it for a link, and a child started by the job inherits it unless the job clears
// it on purpose (that is confinement's to catch, not the ledger's).
std::vector<pid_t> MarkedProcesses(const std::string& marker) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    pid_t pid = 0;
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])) || !absl::SimpleAtoi(name, &pid)) continue;
    if (pid == getpid()) continue;
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    std::string var;
    while (std::getline(environ, var, '\0')) {
      if (var == marker) {
        out.push_back(pid);
        break;
      }
    }
  }
  return out;
}

}  // namespace

absl::Status ProcessLedger::Add(pid_t pgid, const std::string& job, uint64_t generation) {
  std::map<pid_t, Entry> next = entries_;
  next[pgid] = Entry{StartTime(pgid), job, generation};
  if (absl::Status s = Save(next); !s.ok()) return s;
  entries_ = std::move(next);
  return absl::OkStatus();
}

void ProcessLedger::Remove(pid_t pgid) {
  if (entries_.erase(pgid) == 0) return;
  if (absl::Status s = Save(entries_); !s.ok()) {
    spdlog::error("process ledger: {} (it still lists process group {}, which has ended)", std::string(s.message()),
                  pgid);
  }
}

absl::Status ProcessLedger::Save(const std::map<pid_t, Entry>& entries) {
  std::ostringstream text;
  for (const auto& [pgid, e] : entries) {
    text << pgid << ' ' << e.start_time << ' ' << e.job << ' ' << e.generation << '\n';
  }
  absl::Status written = ReplaceFileDurably(path_, text.str());
  if (!written.ok() && last_write_.ok()) spdlog::error("process ledger: {}", std::string(written.message()));
  if (written.ok() && !last_write_.ok()) spdlog::info("process ledger: {} is written again", path_);
  last_write_ = written;
  return written;
}

int ProcessLedger::StopLeftovers(absl::Duration grace) {
  std::ifstream in(path_);
  std::string line;
  std::set<pid_t> stopping;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    pid_t pgid = 0;
    unsigned long long start = 0;
    if (f.size() != 4 || !absl::SimpleAtoi(f[0], &pgid) || !absl::SimpleAtoi(f[1], &start) || pgid <= 1) continue;
    // A living leader with another start time is a new process that reuses the number: not ours.
    // With the leader gone, its orphaned ranks keep the group (and the number) alive.
    const unsigned long long now_start = StartTime(pgid);
    if ((now_start != 0 && now_start != start) || !GroupExists(pgid)) continue;
    spdlog::warn("stopping job {} generation {} (process group {}), left running by a previous agent", f[2], f[3],
                 pgid);
    killpg(pgid, SIGTERM);
    stopping.insert(pgid);
  }
  // What the ledger does not name: a write that failed, a file lost or restored from a backup.
  // Each marked process is kept with its start time, so a number reused meanwhile is left alone.
  std::vector<std::pair<pid_t, unsigned long long>> marked;
  if (!work_dir_.empty()) {
    for (pid_t pid : MarkedProcesses(absl::StrCat(kAgentMarkerVariable, "=", work_dir_))) {
      marked.emplace_back(pid, StartTime(pid));
    }
  }
  const pid_t own_group = getpgrp();
  for (const auto& [pid, start] : marked) {
    const pid_t pgid = getpgid(pid);
    if (pgid > 1 && pgid != own_group) {
      if (stopping.insert(pgid).second) {
        spdlog::warn(
            "stopping process group {} (pid {}): a job's, left running by a previous agent and not in its "
            "ledger {}",
            pgid, pid, path_);
        killpg(pgid, SIGTERM);
      }
    } else {
      kill(pid, SIGTERM);
    }
  }
  const auto ours = [](pid_t pid, unsigned long long start) { return start != 0 && StartTime(pid) == start; };
  const auto any_left = [&] {
    for (pid_t pgid : stopping) {
      if (GroupExists(pgid)) return true;
    }
    for (const auto& [pid, start] : marked) {
      if (ours(pid, start)) return true;
    }
    return false;
  };
  for (absl::Time deadline = MonotonicNow() + grace; MonotonicNow() < deadline && any_left();) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (pid_t pgid : stopping) killpg(pgid, SIGKILL);
  for (const auto& [pid, start] : marked) {
    if (ours(pid, start)) kill(pid, SIGKILL);
  }
  entries_.clear();
  if (absl::Status s = Save(entries_); !s.ok()) {
    spdlog::error("process ledger: cannot empty it: {}", std::string(s.message()));
  }
  return static_cast<int>(stopping.size());
}

}  // namespace hetpool::agent
