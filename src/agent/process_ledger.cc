#include "src/agent/process_ledger.h"

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

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

}  // namespace

void ProcessLedger::Add(pid_t pgid, const std::string& job, uint64_t generation) {
  entries_[pgid] = Entry{StartTime(pgid), job, generation};
  Save();
}

void ProcessLedger::Remove(pid_t pgid) {
  if (entries_.erase(pgid) > 0) Save();
}

void ProcessLedger::Save() const {
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& [pgid, e] : entries_) out << pgid << ' ' << e.start_time << ' ' << e.job << ' ' << e.generation << '\n';
  }
  std::rename(tmp.c_str(), path_.c_str());  // readers never see half a ledger
}

int ProcessLedger::StopLeftovers(absl::Duration grace) {
  std::ifstream in(path_);
  std::string line;
  std::vector<pid_t> stopping;
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
    stopping.push_back(pgid);
  }
  for (absl::Time deadline = absl::Now() + grace; absl::Now() < deadline;) {
    bool any = false;
    for (pid_t pgid : stopping) any = any || GroupExists(pgid);
    if (!any) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (pid_t pgid : stopping) killpg(pgid, SIGKILL);
  entries_.clear();
  Save();
  return static_cast<int>(stopping.size());
}

}  // namespace hetpool::agent
