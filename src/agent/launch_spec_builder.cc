#include "src/agent/launch_spec_builder.h"

#include "absl/strings/str_cat.h"
#include "src/agent/container_launch.h"
#include "src/agent/job_limits.h"
#include "src/agent/process_ledger.h"
#include "src/agent/rendezvous_port.h"
#include "src/common/job_paths.h"

namespace hetpool::agent {

namespace pb = ::hetpool::v1;

namespace {

// The job's environment is exactly this: a fixed base plus the plan; nothing is inherited.
std::map<std::string, std::string> JobEnvironment(const pb::NodeLaunchPlan& plan, const LaunchSpec& spec,
                                                  const LaunchNodeFacts& node) {
  std::map<std::string, std::string> env = {{"PATH", node.job_path}, {"LANG", "C.UTF-8"}, {"PYTHONUNBUFFERED", "1"}};
  if (spec.run_as.switch_user) {
    env["USER"] = env["LOGNAME"] = spec.run_as.account;
    // Caches (torch, pip) need a writable home; an account without one gets the run directory.
    env["HOME"] = spec.run_as.home.empty() ? spec.run_dir : spec.run_as.home;
  }
  // In an image, the image's own PATH stands unless the job sets one.
  if (plan.has_container()) env.erase("PATH");
  for (const auto& [k, v] : plan.env()) env[k] = v;
  // Last, so no plan can change it: how a successor finds this job's processes (process_ledger.h).
  env[kAgentMarkerVariable] = node.work_dir;
  return env;
}

// Simulated cards cannot run vendor kernels: run the real plan's ranks on CPU with gloo, and keep
// what would have been used for inspection.
void RunOnCpuInstead(const pb::NodeLaunchPlan& plan, LaunchSpec& spec) {
  spec.env["HETPOOL_SIMULATED"] = "1";
  spec.env["HETPOOL_PLANNED_DIST_BACKEND"] = plan.dist_backend();
  spec.env["HETPOOL_PLANNED_TORCH_DEVICE"] = plan.torch_device();
  spec.env["HETPOOL_DIST_BACKEND"] = "gloo";
  spec.env["HETPOOL_TORCH_DEVICE"] = "cpu";
  // A job across vendors: its groups' libraries are vendor kernels too.
  for (const char* var : {"HETPOOL_INTRA_BACKEND", "HETPOOL_INTER_BACKEND"}) {
    auto it = spec.env.find(var);
    if (it == spec.env.end()) continue;
    spec.env[absl::StrCat("HETPOOL_PLANNED_", absl::string_view(var).substr(8))] = it->second;
    it->second = "gloo";
  }
  spec.note = absl::StrCat("simulated devices: planned ", plan.dist_backend(), " on ", plan.torch_device(),
                           ", running gloo on CPU");
}

}  // namespace

LaunchSpec BuildLaunchSpec(const pb::LaunchOrder& order, const LaunchNodeFacts& node) {
  const pb::NodeLaunchPlan& plan = order.plan();
  LaunchSpec spec;
  spec.job_id = order.job_id();
  spec.generation = order.generation();
  spec.argv.assign(plan.argv().begin(), plan.argv().end());
  spec.direct = plan.launcher() == "direct";
  // A direct job's argv is the user's: its words are not torchrun's flags.
  spec.hosted_rendezvous_port = spec.direct ? 0 : HostedRendezvousPort(spec.argv);
  spec.working_dir = plan.working_dir();
  spec.procs = plan.procs();
  spec.device_ids.assign(order.device_ids().begin(), order.device_ids().end());
  spec.run_dir = JobRunDir(node.work_dir, order.job_id(), order.generation());
  spec.log_path = JobLogPath(node.work_dir, order.job_id(), order.generation());
  spec.script = plan.script();
  spec.user = plan.user();
  if (node.confined) {
    spec.limits =
        LimitsForLaunch(order, LimitsContext{node.inventory, node.agent_cpus, node.agent_mems, node.job_pids_max});
  }
  if (node.private_tmp) {
    spec.private_tmp = true;
    spec.keep_in_tmp = node.sandbox.job_dirs;
    spec.keep_in_tmp.push_back(spec.run_dir);
    // A job on an MPS-shared card meets its MPS server's shared memory in the host's /dev/shm.
    spec.private_shm = plan.env().count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == 0;
  }
  if (auto dir = ResolveWorkingDir(plan.working_dir(), node.sandbox.job_dirs); dir.ok()) {
    spec.working_dir = *dir;
  } else {
    spec.refused = std::string(dir.status().message());
    spec.refused_failure = "WorkingDirNotFound";  // a directory the job may not use
  }
  if (auto run_as = ResolveRunAs(plan.user(), node.sandbox, node.agent_uid); run_as.ok()) {
    spec.run_as = *std::move(run_as);
  } else if (spec.refused.empty()) {
    spec.refused = std::string(run_as.status().message());
  }
  spec.env = JobEnvironment(plan, spec, node);
  if (spec.direct) {
    // torchrun would give its worker a port free on the node for init_process_group("env://").
    if (const int port = PickFreePort(); port > 0) {
      spec.env["MASTER_PORT"] = std::to_string(port);
    } else if (spec.refused.empty()) {
      spec.refused = "no free port on this node for the job's MASTER_PORT";
    }
  }
  if (node.simulated && plan.torch_device() != "cpu") RunOnCpuInstead(plan, spec);
  AdaptLaunch(plan, node.adapter, spec);
  if (spec.refused.empty() && !plan.has_container()) {
    spec.working_dir_unwritable = WorkingDirUnwritable(spec.working_dir, spec.run_as);
    if (!spec.working_dir_unwritable.empty()) {
      spec.AddNote(absl::StrCat("warning: ", spec.working_dir_unwritable, ": a script that saves there will fail"));
    }
  }
  if (plan.has_container() && spec.refused.empty()) {
    AddContainer(
        order,
        ContainerContext{node.container_runtime, node.node_name, node.sandbox.job_dirs, node.simulated, node.inventory},
        spec);
  }
  return spec;
}

}  // namespace hetpool::agent
