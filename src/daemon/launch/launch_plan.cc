#include "src/daemon/launch/launch_plan.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/common/container_spec.h"
#include "src/common/job_paths.h"
#include "src/daemon/launch/collective.h"

namespace hetpool::daemon {
namespace {

// torchrun's variables for its one worker of a one-node job (torch.distributed.run sets these
// for each worker), so a script that reads them or calls init_process_group("env://") runs the
// same. MASTER_PORT is the agent's: a port free on the node when the process starts.
void AddDirectRankEnvironment(const std::string& job_id, google::protobuf::Map<std::string, std::string>& env) {
  for (const char* zero :
       {"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"}) {
    env[zero] = "0";
  }
  for (const char* one : {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"}) env[one] = "1";
  env["ROLE_NAME"] = "default";
  env["MASTER_ADDR"] = "127.0.0.1";
  env["TORCHELASTIC_RUN_ID"] = job_id;
}

// Whether the one node's one process starts without torchrun. A job of one node and one process
// has nothing for torchrun to coordinate, and torchrun costs about a CPU-second (importing torch)
// and 240 MB before the user's command runs: a sweep of short jobs spent most of its time there.
absl::StatusOr<bool> StartsDirectly(const hetpool::v1::JobSpec& spec, const LaunchInput& input, bool in_image) {
  const std::string& launcher = spec.launcher();
  if (launcher == "torchrun") return false;
  const int procs = input.nodes.front().procs > 0 ? input.nodes.front().procs : spec.procs_per_node();
  const bool one_process =
      input.nodes.size() == 1 && procs == 1 && !spec.has_elastic_nnodes() && input.collective.empty();
  // A Python script outside an image runs under the agent's interpreter: an agent that reported
  // none (an older one) starts it under torchrun.
  const bool interpreter = in_image || spec.command_size() > 0 || !input.nodes.front().python_path.empty();
  if (launcher == "direct") {
    if (!one_process) return absl::FailedPreconditionError("launcher direct: the placement is not one process");
    if (!interpreter) {
      return absl::FailedPreconditionError(absl::StrCat("launcher direct: node ", input.nodes.front().name,
                                                        " reported no Python interpreter (its agent is older)"));
    }
  }
  return one_process && interpreter;
}

}  // namespace

absl::StatusOr<std::vector<hetpool::v1::NodeLaunchPlan>> BuildLaunchPlans(const hetpool::v1::JobSpec& spec,
                                                                          const LaunchInput& input) {
  if (input.nodes.empty()) return absl::InvalidArgumentError("launch plan: no nodes");
  const bool standalone = input.nodes.size() == 1;
  if (!standalone && (input.rendezvous_port <= 0 || input.rendezvous_port > 65535)) {
    return absl::InvalidArgumentError("launch plan: no rendezvous port");
  }
  const bool across_vendors = !input.collective.empty();
  // Each group's nodes and ranks, and each node's place in its group.
  std::map<std::string, int> group_nodes, group_ranks;
  std::vector<int> group_node_rank;
  std::vector<std::string> group_order;
  for (const LaunchNode& node : input.nodes) {
    if (!group_nodes.contains(node.group)) group_order.push_back(node.group);
    group_node_rank.push_back(group_nodes[node.group]++);
    group_ranks[node.group] += node.procs > 0 ? node.procs : spec.procs_per_node();
  }
  // One node hosts its own store on a port the kernel picks (port 0), so no port can be taken
  // already. (torchrun --standalone would do the same on torch 2, but uses a fixed 29400 on 1.13.)
  const std::string endpoint =
      standalone ? "127.0.0.1:0" : absl::StrCat(input.nodes[0].address, ":", input.rendezvous_port);
  const int nnodes = static_cast<int>(input.nodes.size());
  // Elastic: torchrun's own range, so WORLD_SIZE follows the nodes of each round. hetpool
  // launches exactly the nodes it placed; the round closes when all of max have joined, else
  // kLastCallSeconds after min have (a node later than that joins in a second round: torchrun
  // restarts the workers, which resume from their checkpoint, and spends no restart).
  const bool elastic = spec.has_elastic_nnodes();
  const std::string nnodes_arg =
      elastic ? absl::StrCat(spec.elastic_nnodes().min(), ":", spec.elastic_nnodes().max()) : absl::StrCat(nnodes);
  constexpr int kLastCallSeconds = 5;
  std::vector<hetpool::v1::NodeLaunchPlan> plans;
  for (int rank = 0; rank < nnodes; ++rank) {
    const LaunchNode& node = input.nodes[rank];
    const Vendor vendor = across_vendors ? node.vendor : input.vendor;
    const VendorRuntime& runtime = RuntimeOf(vendor);
    const int procs = node.procs > 0 ? node.procs : spec.procs_per_node();
    // In an image, torchrun is the image's own (found on its PATH), not the host's.
    const std::string image = spec.has_container() ? ImageFor(spec.container(), vendor) : "";
    if (spec.has_container() && image.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", node.name, ": the job names no image for ", runtime.name));
    }
    if (image.empty() && node.torchrun_path.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("node ", node.name, " reported no torchrun"));
    }
    hetpool::v1::NodeLaunchPlan plan;
    plan.set_node(node.name);
    plan.set_node_rank(rank);
    plan.set_vendor(std::string(runtime.name));
    plan.set_dist_backend(std::string(runtime.dist_backend));
    plan.set_torch_device(std::string(runtime.torch_device));
    plan.set_working_dir(spec.working_dir());
    plan.set_procs(procs);
    plan.set_user(spec.user());
    // A job across vendors is written for hetpool.dist and its HETPOOL_* backends: not adapted.
    plan.set_adapt(!across_vendors && (!spec.has_adapt() || spec.adapt()));
    // The node's share of the job's host ask, which a confining agent enforces.
    const auto& ask = spec.host();
    plan.set_host_memory_mib(ask.memory_mib_per_node() + ask.memory_mib_per_process() * static_cast<uint64_t>(procs));
    plan.set_cpu_milli(ask.cpu_milli_per_node() + ask.cpu_milli_per_process() * procs);
    plan.set_cpus(node.cpus);
    plan.set_numa_nodes(node.numa_nodes);
    if (!image.empty()) {
      hetpool::v1::ContainerLaunch* container = plan.mutable_container();
      container->set_image(image);
      *container->mutable_mounts() = spec.container().mounts();
      container->set_workdir(spec.container().workdir());
    }

    auto& argv = *plan.mutable_argv();
    auto add = [&argv](std::initializer_list<std::string> args) {
      for (const auto& a : args) argv.Add(std::string(a));
    };
    absl::StatusOr<bool> direct = StartsDirectly(spec, input, !image.empty());
    if (!direct.ok()) return direct.status();
    plan.set_launcher(*direct ? "direct" : "torchrun");
    if (*direct) {
      // A Python script as torchrun would run it (-u: unbuffered, as its workers are), under the
      // image's python3 in an image; a command as it is.
      if (spec.command_size() == 0) add({image.empty() ? node.python_path : "python3", "-u"});
    } else {
      const std::string host = rank == 0 ? "is_host=1" : "is_host=0";
      add({image.empty() ? node.torchrun_path : "torchrun", "--nnodes", nnodes_arg, "--nproc_per_node",
           absl::StrCat(procs), "--node_rank", absl::StrCat(rank), "--rdzv_backend", "c10d", "--rdzv_endpoint",
           endpoint, "--rdzv_id", input.job_id,
           // Tell c10d which node hosts the TCP store, instead of guessing from host names: on one
           // machine (or behind NAT) every node would otherwise claim to be the host.
           "--rdzv_conf", elastic ? absl::StrCat(host, ",last_call_timeout=", kLastCallSeconds) : host,
           // hetpool restarts whole gangs itself (counting against max_restarts).
           "--max_restarts", "0",
           // How soon torchrun sees a rank exit: PyTorch 2.x polls every 0.1 s, 1.13 every 5 s,
           // which kept every finished or failed job running 5 s longer than its ranks.
           "--monitor_interval", "0.1",
           // torch 1.13's default --redirects/--tee values crash on Python 3.11 (Std flag iteration
           // skips NONE/ALL); explicit 1 (stdout) parses, and --log_dir keeps per-rank copies.
           "--redirects", "1", "--tee", "1", "--log_dir",
           absl::StrCat(JobRunDir(node.work_dir, input.job_id, input.generation), "/torchrun")});
      if (spec.command_size() > 0) add({"--no_python"});
    }
    // The job's own words, after its launcher's.
    if (spec.command_size() > 0) {
      for (const auto& arg : spec.command()) argv.Add(std::string(arg));
    } else {
      argv.Add(std::string(spec.python().script()));
      plan.set_script(spec.python().script());
      for (const auto& arg : spec.python().args()) argv.Add(std::string(arg));
    }

    auto& env = *plan.mutable_env();
    for (const auto& [key, value] : spec.env()) env[key] = value;
    if (*direct) AddDirectRankEnvironment(input.job_id, env);
    std::vector<std::string> indices;
    for (const auto& id : node.device_ids) {
      auto it = node.device_index.find(id);
      if (it == node.device_index.end()) {
        return absl::FailedPreconditionError(absl::StrCat("node ", node.name, " has no device ", id));
      }
      indices.push_back(absl::StrCat(it->second));
    }
    const std::string visible = absl::StrJoin(indices, ",");
    for (absl::string_view var : runtime.visibility) env[std::string(var)] = visible;
    env["HETPOOL_JOB_ID"] = input.job_id;
    env["HETPOOL_GENERATION"] = absl::StrCat(input.generation);
    env["HETPOOL_RESTART_COUNT"] = absl::StrCat(input.restart_count);
    // Where the job may keep its checkpoints: on its own storage (under its working dir), the
    // same for every generation, so a generation after a hardware failure or a preemption finds
    // the last save. The job makes it (os.makedirs): nothing of it is created by the agent.
    env["HETPOOL_CHECKPOINT_DIR"] = absl::StrCat(spec.working_dir(), "/.hetpool/checkpoints/", input.job_id);
    // A job that checkpoints resumes instead of starting over (it may also just look for its
    // checkpoint); the variable tells it why it runs again.
    if (input.preempted) env["HETPOOL_PREEMPTED"] = "1";
    if (input.resized) env["HETPOOL_RESIZED"] = "1";
    if (elastic) {
      env["HETPOOL_NNODES_MIN"] = absl::StrCat(spec.elastic_nnodes().min());
      env["HETPOOL_NNODES_MAX"] = absl::StrCat(spec.elastic_nnodes().max());
    }
    if (input.array_index >= 0) {
      env["HETPOOL_ARRAY_INDEX"] = absl::StrCat(input.array_index);
      env["HETPOOL_ARRAY_COUNT"] = absl::StrCat(input.array_count);
    }
    env["HETPOOL_NODE_NAME"] = node.name;
    env["HETPOOL_VENDOR"] = std::string(runtime.name);
    env["HETPOOL_DIST_BACKEND"] = std::string(runtime.dist_backend);
    env["HETPOOL_TORCH_DEVICE"] = std::string(runtime.torch_device);
    for (const auto& [key, value] : input.layout_env) env[key] = value;
    if (across_vendors) {
      // torchrun numbers ranks itself (c10d orders the nodes), so a rank's place in its group is
      // HETPOOL_GROUP_NODE_RANK x the group's procs per node + LOCAL_RANK (hetpool.dist does it).
      const CollectiveBackends backends = BackendsFor(input.collective, runtime);
      plan.set_group(node.group);
      plan.set_dist_backend(backends.intra);
      plan.set_inter_backend(backends.inter);
      env["HETPOOL_COLLECTIVE"] = input.collective;
      env["HETPOOL_DIST_BACKEND"] = backends.world;
      env["HETPOOL_INTRA_BACKEND"] = backends.intra;
      env["HETPOOL_INTER_BACKEND"] = backends.inter;
      env["HETPOOL_GROUP"] = node.group;
      env["HETPOOL_GROUPS"] = absl::StrJoin(group_order, ",");
      env["HETPOOL_GROUP_NODE_RANK"] = absl::StrCat(group_node_rank[rank]);
      env["HETPOOL_GROUP_NNODES"] = absl::StrCat(group_nodes[node.group]);
      env["HETPOOL_GROUP_WORLD"] = absl::StrCat(group_ranks[node.group]);
      env["HETPOOL_GROUP_PROCS"] = absl::StrCat(procs);
    }
    if (!node.micro_batches.empty()) {
      if (static_cast<int>(node.micro_batches.size()) != procs) {
        return absl::InternalError(
            absl::StrCat("node ", node.name, ": ", node.micro_batches.size(), " micro batches for ", procs, " ranks"));
      }
      // Each local rank's share (index LOCAL_RANK); the job weighs its gradients by share / global.
      env["HETPOOL_MICRO_BATCHES"] = absl::StrJoin(node.micro_batches, ",");
      env["HETPOOL_GLOBAL_BATCH"] = absl::StrCat(spec.global_batch());
      if (std::all_of(node.micro_batches.begin(), node.micro_batches.end(),
                      [&](int b) { return b == node.micro_batches.front(); })) {
        env["HETPOOL_MICRO_BATCH"] = absl::StrCat(node.micro_batches.front());
      }
    }
    if (input.device_milli < 1000) {
      // The share is accounted by hetpool; enforcing it is up to the vendor mechanism or the job
      // (docs/sharing.md): MPS honours the thread percentage and the pinned memory limit when an
      // MPS daemon runs, and a PyTorch job can cap itself with set_per_process_memory_fraction.
      env["HETPOOL_DEVICE_MILLI"] = absl::StrCat(input.device_milli);
      env["HETPOOL_DEVICE_MEMORY_MIB"] = absl::StrCat(input.device_memory_mib);
      if (input.vendor == Vendor::kNvidia) {
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = absl::StrCat(std::max(1, input.device_milli / 10));
        // MPS's per-client limit on the card's memory, "<ordinal>=<size>": a fractional job sees
        // exactly one card (its visibility variable names it alone), ordinal 0.
        if (input.device_memory_mib > 0) {
          env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = absl::StrCat("0=", input.device_memory_mib, "M");
        }
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace hetpool::daemon
