// A launch in a container image, around what the runner does for any launch: the container an
// order asks for (the session, from the order and the node's inventory), the runtime's command
// line and the env file just before the fork, and what is left to clean when it ends (the runner).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/common.pb.h"
#include "src/agent/container_runtime.h"
#include "src/agent/runner.h"

namespace hetpool::agent {

// What of the node a container needs.
struct ContainerContext {
  ContainerRuntime* runtime = nullptr;  // null: the node has none
  std::string node_name;
  std::vector<std::string> job_dirs;                      // mounts inside these may be read-write
  bool simulated = false;                                 // simulated cards have no device files
  const hetpool::v1::NodeInventory* inventory = nullptr;  // the cards' device files
};

// Sets spec.container from the order's plan: the job's account, its working and run dirs and its
// own mounts (resolved, ResolveMounts), exactly its cards' device files, those their vendor's cards
// share and the vendor's driver libraries. Or spec.refused, saying why it cannot start here.
void AddContainer(const hetpool::v1::LaunchOrder& order, const ContainerContext& context, LaunchSpec& spec);

// Just before the fork: writes the job's environment to the env file beside the log (where no
// job account can write) and gives the runtime's command line and environment in argv and env.
// A non-empty return is why it cannot start.
std::string PrepareContainer(const LaunchSpec& spec, ContainerRuntime* runtime, const std::string& cgroup_path,
                             std::vector<std::string>& argv, std::map<std::string, std::string>& env);

// Once it exited: removes what the runtime left (a killed runtime leaves its container's record,
// which would take the name) and the env file, and has the node's images asked again (a pull).
void EndContainer(const LaunchSpec& spec, ContainerRuntime* runtime);

}  // namespace hetpool::agent
