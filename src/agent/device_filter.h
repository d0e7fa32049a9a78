// Cards' device files on cgroup v2, which has no devices controller: a BPF_CGROUP_DEVICE program
// attached to the job's cgroup answers every open and mknod of a device file in it, as runc and
// systemd do. Ours denies the listed device numbers and allows every other (the same rule as
// the v1 devices.deny lines, and as Slurm's ConstrainDevices: the cards not given are closed).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/agent/job_cgroup.h"

namespace hetpool::agent {

// Loads the program for `denied` and attaches it to the cgroup directory `cgroup_dir` (with
// BPF_F_ALLOW_MULTI: programs of parent cgroups still apply). FAILED_PRECONDITION with the
// kernel's error when loading or attaching fails (no CAP_BPF/CAP_SYS_ADMIN, no cgroup v2).
absl::Status AttachDeviceDenyList(const std::string& cgroup_dir, const std::vector<DeviceNumber>& denied);

}  // namespace hetpool::agent
