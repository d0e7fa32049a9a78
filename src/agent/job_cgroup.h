// Confinement: one cgroup per job generation on the node, created before torchrun runs and
// removed once its last process is gone, as Slurm's task/cgroup and proctrack/cgroup plugins and
// the kubelet do. The cgroup is what makes a job's end final (every process in it is killed,
// however it escaped its process group: setsid, a double fork, ignored signals) and what holds
// it to its ask (memory, CPU quota, pids, NUMA-local cores, the device files of its own cards).
//
// Both kernel interfaces: cgroup v2 (one tree; cgroup.kill, memory.max, cpu.max ...) and cgroup
// v1 (one tree per controller; the freezer stops a job while its processes are killed). Layout:
// <root>/hetpool/<agent>/<job>-g<generation>, <agent> naming this agent (node name and a hash of
// its work dir, so two agents on one host never share a cgroup, and a restarted agent finds its
// predecessor's).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hetpool::agent {

// --confine: off (no cgroups: today's behaviour before confinement), auto (confine where the
// node's cgroups are writable, else say so and run unconfined), required (refuse to start).
enum class ConfineMode { kOff, kAuto, kRequired };
absl::StatusOr<ConfineMode> ParseConfineMode(absl::string_view text);

enum class CgroupVersion { kV1, kV2 };

// The cgroup filesystems /proc/self/mounts lists: the cgroup2 mount, and each v1 controller's.
struct CgroupMounts {
  std::string v2;                         // "" when none
  std::map<std::string, std::string> v1;  // controller ("memory", "cpu" ...) -> mount point
};
CgroupMounts ParseCgroupMounts(absl::string_view mounts_text);

// A device file's number, as the devices controller names it ("c 195:3").
struct DeviceNumber {
  char type = 'c';  // 'c' character, 'b' block
  unsigned major = 0;
  unsigned minor = 0;
  std::string path;  // for messages
};
// The number of the device file at `path`; NOT_FOUND when it does not exist or is no device.
absl::StatusOr<DeviceNumber> DeviceNumberOf(const std::string& path);

// What one job generation's cgroup is held to. Zero / empty: not limited.
struct JobLimits {
  uint64_t memory_mib = 0;
  bool memory_asked = false;                 // memory_mib is the job's own ask (else its cards' share of the node)
  int64_t cpu_milli = 0;                     // CFS quota: 1000 = one core's time
  uint64_t pids = 0;                         // processes and threads
  std::string cpus;                          // cpuset cores ("0-15,32-47"); "" = all the agent's
  std::string mems;                          // cpuset memory nodes; "" = all the agent's
  std::vector<DeviceNumber> denied_devices;  // other cards' device files
};

// One job generation's cgroup. Not thread-safe (the runner's thread uses it).
class JobCgroup {
 public:
  virtual ~JobCgroup() = default;
  // Puts `pid` in the cgroup (then all it forks is in it too). The runner does this while the
  // child waits for its word, before anything of the job runs.
  virtual absl::Status Add(pid_t pid) = 0;
  // Every process in the cgroup now.
  virtual std::vector<pid_t> Processes() const = 0;
  // Sends `signal` to every process in the cgroup (SIGTERM when a stop begins: a process that left
  // the job's process group hears it too).
  void SignalAll(int signal) const;
  // SIGKILLs everything in the cgroup, including what forks meanwhile, and waits until it is
  // empty, at most `patience`. Returns how many processes were killed; DEADLINE_EXCEEDED when
  // some are left (a process stuck in the kernel: the caller tries again later).
  virtual absl::StatusOr<int> KillAll(absl::Duration patience) = 0;
  // How many processes the kernel's OOM killer has killed in the cgroup.
  virtual int OomKills() const = 0;
  // Removes the (empty) cgroup.
  virtual absl::Status Remove() = 0;
  // "memory 512 MiB, cpu 2000m, cores 0-3, pids 32768, 2 other cards' device files denied"
  const std::string& description() const { return description_; }
  const JobLimits& limits() const { return limits_; }
  // Its path below the hierarchy's root ("/hetpool/node-a-1f2e3d4c/job-000001-g1"), as a
  // container runtime's --cgroup-parent takes it: the container's cgroups go below this one.
  const std::string& path() const { return path_; }
  void set_path(std::string path) { path_ = std::move(path); }

 protected:
  JobLimits limits_;
  std::string description_;
  std::string path_;
};

struct ConfinementOptions {
  std::string mounts_file = "/proc/self/mounts";
  std::string agent_name;  // <agent> in the layout above: a safe path component
  // Memory for all this agent's jobs together (the agent's parent cgroup), so that no job, nor
  // all of them, can take the memory the agent and the node need. 0: not limited.
  uint64_t jobs_memory_mib = 0;
  std::optional<CgroupVersion> version;  // nullopt: v2 when it has the controllers, else v1
};

class Confinement {
 public:
  // Finds the node's cgroups and makes the agent's parent cgroup in them. FAILED_PRECONDITION
  // saying what is missing or not writable when neither version can confine a job.
  static absl::StatusOr<std::unique_ptr<Confinement>> Open(const ConfinementOptions& options);
  virtual ~Confinement() = default;

  virtual CgroupVersion version() const = 0;
  // For the agent's log: "cgroup v1 (memory cpu cpuset pids freezer devices) under
  // /sys/fs/cgroup/<c>/hetpool/node-a-1f2e3d4c".
  virtual std::string Describe() const = 0;
  // Whether cards' device files can be denied on this version.
  virtual bool DevicesEnforced() const = 0;
  // The cores and memory nodes the agent's parent cgroup has (cpuset), "" when unknown.
  virtual std::string Cpus() const = 0;
  virtual std::string Mems() const = 0;
  // Creates a job generation's cgroup (`name`: a safe path component) with `limits`.
  virtual absl::StatusOr<std::unique_ptr<JobCgroup>> Create(const std::string& name, const JobLimits& limits) = 0;
  // The job cgroups an earlier run of this agent left (it was killed): kills everything in them
  // and removes them. Returns how many processes were killed.
  virtual int StopLeftovers() = 0;
  // At the agent's exit, every job stopped: removes the agent's own (empty) cgroups.
  virtual absl::Status Close() = 0;
};

// For the fence watchdog, which knows job process groups, not cgroups: SIGKILLs everything in
// the job cgroup (one under hetpool/, v1's freezer or v2's) that `pid` is in, and waits at most
// `patience` until it is empty. Returns how many were killed (DEADLINE_EXCEEDED while some are
// still listed, a zombie whose parent is frozen say); NOT_FOUND when `pid` is in none.
absl::StatusOr<int> KillJobCgroupOf(pid_t pid, absl::Duration patience);

// Exposed for tests: the v2 implementation rooted at `root` (a cgroup2 mount, or a directory
// shaped like one).
absl::StatusOr<std::unique_ptr<Confinement>> OpenCgroupV2(const std::string& root, const ConfinementOptions& options);

}  // namespace hetpool::agent
