// Whose each process holding a card is. The vendor library lists a card's processes by pid
// (NVML's compute processes); the agent sorts them into: one of its running jobs on that card
// (expected), one of its jobs that has ended (a leftover: the agent ends it and says so in that
// job's events), or nobody's (the card is dirty: the scheduler places nothing on it until the
// process is gone). A job that finished can otherwise leave a card half full under the next job
// placed on it, which is what the first run on a real H200 found (issue 47, item 2).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hetpool/device.h"

namespace hetpool::agent {

// What /proc says of a process.
struct ProcessFacts {
  bool visible = false;  // false: gone, or in a pid namespace the agent does not see
  uid_t uid = 0;
  pid_t group = 0;      // its process group
  std::string command;  // /proc/<pid>/comm
};
using ProcessReader = std::function<ProcessFacts(int pid)>;
ProcessFacts ReadProcessFacts(int pid);

// One job generation on this node, as far as owning processes goes.
struct JobOwnership {
  std::string key;                 // "job-000007 g1"
  pid_t group = 0;                 // torchrun's process group
  std::set<pid_t> cgroup_members;  // the generation's cgroup's processes (confined agents)
  std::optional<uid_t> uid;        // the job's own account; unset when it runs as root or the agent
  std::vector<std::string> device_ids;
};

// The job `p` (pid `pid`) belongs to: its cgroup, else its process group, else its account;
// among several jobs of one account, one placed on `device_id` first. nullptr: none of them.
const JobOwnership* OwnerOf(int pid, const ProcessFacts& p, const std::string& device_id,
                            const std::vector<JobOwnership>& jobs);

// Sets each listed process's owner and each card's `dirty` from the node's running jobs: a card
// is dirty while a process of none of them, or of a job not given that card, holds it.
void AttributeCardProcesses(std::vector<DeviceRecord>& devices, const std::vector<JobOwnership>& running,
                            const ProcessReader& read = ReadProcessFacts);

// SIGKILLs `pid` if it is still the process `facts` describe (same account and command). The
// pid came from the vendor library and the facts from /proc a moment before: the process is
// pinned with a pidfd and read again, so a pid reused in between is not killed. False: not
// killed (gone, changed, or the kill failed).
bool KillIfStill(int pid, const ProcessFacts& facts, const ProcessReader& read = ReadProcessFacts);

// "pid 4242 (uid 0, python3) holds 2,658 MiB"
std::string DescribeHolder(const CardProcess& process, const ProcessFacts& facts);

}  // namespace hetpool::agent
