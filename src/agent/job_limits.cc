#include "src/agent/job_limits.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "src/common/cpu_list.h"

namespace hetpool::agent {
namespace pb = hetpool::v1;

namespace {
std::set<int> Intersect(const std::string& a, const std::string& b) {
  const std::set<int> left = ParseCpuList(a), right = ParseCpuList(b);
  std::set<int> both;
  std::set_intersection(left.begin(), left.end(), right.begin(), right.end(), std::inserter(both, both.end()));
  return both;
}
}  // namespace

JobLimits LimitsForLaunch(const pb::LaunchOrder& order, const LimitsContext& context) {
  const pb::NodeLaunchPlan& plan = order.plan();
  const pb::NodeInventory empty;
  const pb::NodeInventory& node = context.inventory != nullptr ? *context.inventory : empty;
  JobLimits limits;
  limits.pids = context.pids;
  limits.cpu_milli = plan.cpu_milli();
  const std::set<std::string> given(order.device_ids().begin(), order.device_ids().end());
  if (plan.host_memory_mib() > 0) {
    limits.memory_mib = plan.host_memory_mib();
    limits.memory_asked = true;
  } else if (!given.empty() && node.devices_size() > 0 && node.memory_mib() > 0) {
    limits.memory_mib = node.memory_mib() * given.size() / static_cast<uint64_t>(node.devices_size());
  }
  std::set<std::string> own_files;
  for (const auto& d : node.devices()) {
    if (given.contains(d.id())) own_files.insert(d.device_nodes().begin(), d.device_nodes().end());
  }
  for (const auto& d : node.devices()) {
    if (given.contains(d.id())) continue;
    for (const auto& file : d.device_nodes()) {
      if (own_files.contains(file)) continue;  // a file the job's own card needs too
      if (auto number = DeviceNumberOf(file); number.ok()) limits.denied_devices.push_back(*number);
    }
  }
  // The cores near its cards (the plan's) that the agent has; not when they are fewer than the
  // CPU the job asked for, which would throttle it below its own ask.
  const std::set<int> cores = Intersect(plan.cpus(), context.agent_cpus);
  if (!cores.empty() && limits.cpu_milli <= static_cast<int64_t>(cores.size()) * 1000) {
    limits.cpus = FormatCpuList(cores);
    limits.mems = FormatCpuList(Intersect(plan.numa_nodes(), context.agent_mems));
  }
  return limits;
}

}  // namespace hetpool::agent
