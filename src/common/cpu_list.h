// Linux CPU and memory-node lists ("0-3,8,10-11": sysfs local_cpulist, cpuset.cpus).
#pragma once

#include <set>
#include <string>

#include "absl/strings/string_view.h"

namespace hetpool {

// The numbers in `list`; what does not parse is left out (sysfs and cgroupfs write these).
std::set<int> ParseCpuList(absl::string_view list);
// The shortest list naming `cpus` ("0-3,8"); "" for none.
std::string FormatCpuList(const std::set<int>& cpus);

}  // namespace hetpool
