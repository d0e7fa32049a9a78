#include "src/agent/card_holders.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hetpool::agent {
namespace {

std::string ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

ProcessFacts ReadProcessFacts(int pid) {
  ProcessFacts facts;
  const std::string status = ReadSmallFile(absl::StrCat("/proc/", pid, "/status"));
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "Uid:")) continue;
    const std::vector<absl::string_view> ids = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    unsigned uid = 0;
    if (!ids.empty() && absl::SimpleAtoi(ids[0], &uid)) {
      facts.visible = true;
      facts.uid = uid;
    }
  }
  if (!facts.visible) return facts;
  facts.group = getpgid(pid);
  facts.command = std::string(absl::StripAsciiWhitespace(ReadSmallFile(absl::StrCat("/proc/", pid, "/comm"))));
  return facts;
}

const JobOwnership* OwnerOf(int pid, const ProcessFacts& p, const std::string& device_id,
                            const std::vector<JobOwnership>& jobs) {
  if (!p.visible) return nullptr;
  for (const auto& job : jobs) {
    if (job.cgroup_members.contains(pid)) return &job;  // wherever it went, it is the job's
  }
  for (const auto& job : jobs) {
    if (job.group > 0 && job.group == p.group) return &job;
  }
  // Left its process group (setsid) and unconfined: its account says whose it is.
  const JobOwnership* by_account = nullptr;
  for (const auto& job : jobs) {
    if (!job.uid || *job.uid != p.uid) continue;
    const bool on_card = std::find(job.device_ids.begin(), job.device_ids.end(), device_id) != job.device_ids.end();
    if (on_card) return &job;
    if (by_account == nullptr) by_account = &job;
  }
  return by_account;
}

bool KillIfStill(int pid, const ProcessFacts& facts, const ProcessReader& read) {
  if (pid <= 0 || !facts.visible) return false;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return false;  // gone (or a kernel before 5.3: then nothing is killed by a guess)
  const ProcessFacts now = read(pid);
  const bool same = now.visible && now.uid == facts.uid && now.command == facts.command;
  const bool killed = same && syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0;
  close(pidfd);
  return killed;
}

std::string DescribeHolder(const CardProcess& process, const ProcessFacts& facts) {
  std::string who = facts.visible ? absl::StrCat("pid ", process.pid, " (uid ", facts.uid,
                                                 facts.command.empty() ? "" : ", " + facts.command, ")")
                                  : absl::StrCat("pid ", process.pid, " (not visible to the agent)");
  if (process.memory_mib == 0) return absl::StrCat(who, " holds it");
  return absl::StrCat(who, " holds ", process.memory_mib, " MiB");
}

void AttributeCardProcesses(std::vector<DeviceRecord>& devices, const std::vector<JobOwnership>& running,
                            const ProcessReader& read) {
  for (auto& device : devices) {
    std::vector<std::string> strangers;
    for (auto& process : device.processes) {
      const ProcessFacts facts = read(process.pid);
      const JobOwnership* owner = OwnerOf(process.pid, facts, device.id, running);
      if (owner == nullptr) {
        process.owner.clear();
        strangers.push_back(DescribeHolder(process, facts));
        continue;
      }
      process.owner = owner->key;
      if (std::find(owner->device_ids.begin(), owner->device_ids.end(), device.id) == owner->device_ids.end()) {
        strangers.push_back(
            absl::StrCat(DescribeHolder(process, facts), " for ", owner->key, ", which was not given this card"));
      }
    }
    // A few named are enough to act on; the inventory stays small however many there are.
    constexpr size_t kNamed = 4;
    const size_t more = strangers.size() > kNamed ? strangers.size() - kNamed : 0;
    strangers.resize(std::min(strangers.size(), kNamed));
    device.dirty = absl::StrCat(absl::StrJoin(strangers, "; "), more > 0 ? absl::StrCat(" and ", more, " more") : "");
  }
}

}  // namespace hetpool::agent
