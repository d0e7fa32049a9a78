// The files of a cgroup tree as the job cgroups use them, on either version: control files
// written whole and read, the processes listed in a cgroup and below it, directories made and
// removed deepest first, and the kill loop both versions share. Also each version's entry point.
// For job_cgroup.cc, cgroup_v1.cc and cgroup_v2.cc only.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/agent/job_cgroup.h"

namespace hetpool::agent::cgroup_files {

namespace fs = std::filesystem;

inline constexpr const char* kTop = "hetpool";  // <root>/hetpool/<agent>/<job>-g<N>
inline constexpr int64_t kCfsPeriodUs = 100000;
// The controllers hetpool uses on v1; memory, pids and freezer are needed to confine at all.
inline constexpr const char* kV1Controllers[] = {"memory", "cpu", "cpuset", "pids", "freezer", "devices"};
inline constexpr const char* kV1Needed[] = {"memory", "pids", "freezer"};

std::string Errno(const std::string& what);
// Control files are written whole, in one write(2), as the kernel parses them.
absl::Status WriteControl(const fs::path& file, absl::string_view value);
std::string ReadControl(const fs::path& file);
std::vector<pid_t> ReadPids(const fs::path& procs);
// "oom_kill 3" in memory.events (v2) or memory.oom_control (v1).
int KeyedCount(const std::string& text, absl::string_view key);
// Every process in `dir` and in the cgroups below it (a container runtime makes its own below
// the job's: podman's libpod-<id> and conmon).
std::vector<pid_t> ReadPidsTree(const fs::path& dir);
absl::Status MakeDir(const fs::path& dir);
absl::Status RemoveDir(const fs::path& dir);
// A job's cgroup and the (empty) cgroups a runtime left below it, deepest first.
absl::Status RemoveTree(const fs::path& dir);
// What confines a job, in words, for its events.
std::string Describe(const JobLimits& l, bool devices_enforced);
// Kills what `procs` lists until it lists nothing (or patience ends), each pid counted once.
// `stop`/`resume` freeze and thaw around each round where the version can (so nothing forks
// between the listing and the kill).
absl::StatusOr<int> KillListed(const fs::path& dir, absl::Duration patience, const std::function<void()>& stop,
                               const std::function<void()>& resume);

// Each version's confinement (cgroup_v1.cc; v2's OpenCgroupV2 is in job_cgroup.h), and a job
// cgroup that exists already, to be killed (KillJobCgroupOf).
absl::StatusOr<std::unique_ptr<Confinement>> OpenCgroupV1(const CgroupMounts& mounts,
                                                          const ConfinementOptions& options);
std::unique_ptr<JobCgroup> ExistingV2Job(const fs::path& dir);
std::unique_ptr<JobCgroup> ExistingV1Job(const fs::path& freezer_dir);

}  // namespace hetpool::agent::cgroup_files
