// What a confined launch's cgroup is held to (JobLimits, job_cgroup.h), from the daemon's order
// and the node's inventory: host memory from the job's ask (or, with none, its cards' share of
// the node's memory), its CPU quota, pids, the cores and memory nodes near its cards that the
// agent has, and the device files of the node's other cards denied.
#pragma once

#include <cstdint>
#include <string>

#include "hetpool/v1/agent.pb.h"
#include "src/agent/job_cgroup.h"

namespace hetpool::agent {

struct LimitsContext {
  const hetpool::v1::NodeInventory* inventory = nullptr;  // as last reported
  std::string agent_cpus;                                 // the agent's own cpuset (Confinement::Cpus); "" unknown
  std::string agent_mems;
  uint64_t pids = 0;  // --job-pids-max
};

JobLimits LimitsForLaunch(const hetpool::v1::LaunchOrder& order, const LimitsContext& context);

}  // namespace hetpool::agent
