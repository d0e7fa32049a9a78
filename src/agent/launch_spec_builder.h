// From a launch order to what the runner starts: the job's argv, its complete environment, its
// directories, account, limits and (in an image) its container. It reads the order and the node
// facts it is given and starts nothing; what it looks up is the working dir (resolved inside the
// job dirs) and the account (the sandbox's, which may take a dynamic uid for the job's user).
#pragma once

#include <string>
#include <vector>

#include "hetpool/v1/agent.pb.h"
#include "src/agent/job_sandbox.h"
#include "src/agent/launch_adapter.h"
#include "src/agent/runner.h"

namespace hetpool::agent {

class ContainerRuntime;

// What of the node a launch spec depends on, as the session knows it when the order arrives.
struct LaunchNodeFacts {
  std::string node_name;
  std::string work_dir;  // the agent's: run dirs and logs live under it (job_paths.h)
  std::string job_path;  // PATH of every job outside an image
  SandboxOptions sandbox;
  uid_t agent_uid = 0;       // whether the agent may switch accounts
  bool simulated = false;    // simulated cards: the ranks run gloo on CPU
  AdapterContext adapter;    // the launch adapter (launch_adapter.h)
  bool private_tmp = false;  // jobs get a /tmp of their own (private_tmp.h)
  // Confined agents only: the agent's cpuset and memory nodes, and --job-pids-max.
  bool confined = false;
  std::string agent_cpus;
  std::string agent_mems;
  uint64_t job_pids_max = 32768;
  ContainerRuntime* container_runtime = nullptr;          // null: the node has none
  const hetpool::v1::NodeInventory* inventory = nullptr;  // as last reported to the daemon
};

// The spec for `order`. A launch that must not start carries `refused` (and `refused_failure`)
// instead of an error: the runner reports it like an exit, so the daemon hears why.
LaunchSpec BuildLaunchSpec(const hetpool::v1::LaunchOrder& order, const LaunchNodeFacts& node);

}  // namespace hetpool::agent
