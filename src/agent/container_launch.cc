#include "src/agent/container_launch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "hetpool/vendor.h"

namespace hetpool::agent {

namespace pb = ::hetpool::v1;

void AddContainer(const pb::LaunchOrder& order, const ContainerContext& context, LaunchSpec& spec) {
  const pb::NodeLaunchPlan& plan = order.plan();
  if (context.runtime == nullptr) {
    spec.refused = kNoRuntime;
    spec.refused_failure = "ContainerFailed";
    return;
  }
  ContainerRun run;
  run.name = absl::StrCat("hetpool-", context.node_name, "-", order.job_id(), "-g", order.generation());
  run.image = plan.container().image();
  run.uid = spec.run_as.switch_user ? spec.run_as.uid : geteuid();
  run.gid = spec.run_as.switch_user ? spec.run_as.gid : getegid();
  if (spec.run_as.switch_user) run.groups = spec.run_as.groups;
  run.workdir = plan.container().workdir().empty() ? spec.working_dir : plan.container().workdir();
  run.command = spec.argv;
  // The job's working dir and its run dir (HOME, torchrun's logs) at their own paths, then the
  // job's own mounts, each resolved here first (nothing the job can swap is opened by name).
  std::vector<ContainerMount> wanted;
  for (const auto& m : plan.container().mounts()) wanted.push_back({m.source(), m.target(), m.read_only()});
  auto mounts = ResolveMounts(wanted, context.job_dirs, context.runtime->options().mount_dirs);
  if (!mounts.ok()) {
    spec.refused = absl::StrCat("not started: ", mounts.status().message());
    spec.refused_failure = "MountRefused";
    return;
  }
  run.mounts = {{spec.working_dir, spec.working_dir, false}, {spec.run_dir, spec.run_dir, false}};
  run.mounts.insert(run.mounts.end(), mounts->begin(), mounts->end());
  const std::optional<Vendor> vendor = ParseVendor(plan.vendor());
  if (!context.simulated && vendor && context.inventory != nullptr) {
    for (const auto& id : spec.device_ids) {
      for (const auto& d : context.inventory->devices()) {
        if (d.id() == id) run.devices.insert(run.devices.end(), d.device_nodes().begin(), d.device_nodes().end());
      }
    }
    if (!spec.device_ids.empty()) {
      for (auto& shared : SharedDeviceFiles(*vendor)) run.devices.push_back(std::move(shared));
      for (auto& library : DriverLibraryMounts(*vendor)) run.mounts.push_back(std::move(library));
    }
  }
  spec.container = std::move(run);
}

std::string PrepareContainer(const LaunchSpec& spec, ContainerRuntime* runtime, const std::string& cgroup_path,
                             std::vector<std::string>& argv, std::map<std::string, std::string>& env) {
  if (runtime == nullptr) return kNoRuntime;
  ContainerRun run = *spec.container;
  run.cgroup_parent = cgroup_path;
  auto text = EnvFileText(spec.env);
  if (!text.ok()) return absl::StrCat("not started: ", text.status().message());
  // Beside the log, where no job account can write: the runtime (root) reads it by name.
  run.env_file = absl::StrCat(spec.log_path, ".env");
  const int fd = open(run.env_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::StrCat("not started: ", run.env_file, ": ", std::strerror(errno));
  const bool written = write(fd, text->data(), text->size()) == static_cast<ssize_t>(text->size());
  close(fd);
  if (!written) return absl::StrCat("not started: ", run.env_file, ": ", std::strerror(errno));
  argv = runtime->RunArgv(run);
  env = runtime->Environment();
  return "";
}

void EndContainer(const LaunchSpec& spec, ContainerRuntime* runtime) {
  unlink(absl::StrCat(spec.log_path, ".env").c_str());
  if (runtime == nullptr || !spec.container) return;
  runtime->Remove(spec.container->name);
  runtime->Invalidate();
}

}  // namespace hetpool::agent
