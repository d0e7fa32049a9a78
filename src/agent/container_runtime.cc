#include "src/agent/container_runtime.h"

#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/agent/job_sandbox.h"
#include "src/agent/program_run.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {
namespace {

constexpr const char* kRuntimePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Runs argv (no shell) with `env`, stderr on /dev/null, and returns its stdout; an error when it
// cannot start, exits non-zero or outlives `patience` (then it is killed).
absl::StatusOr<std::string> RunAndCapture(const std::vector<std::string>& args,
                                          const std::map<std::string, std::string>& env, absl::Duration patience) {
  ProgramOutput run = RunProgram(args, patience, {.env = env});
  const std::string what = absl::StrJoin(args, " ");
  switch (run.end) {
    case ProgramOutput::End::kNotStarted: return absl::InternalError(run.error);
    case ProgramOutput::End::kTimedOut:
      return absl::DeadlineExceededError(absl::StrCat(what, ": no answer in ", absl::FormatDuration(patience)));
    case ProgramOutput::End::kExited: break;
  }
  if (run.exit_code != 0) return absl::UnavailableError(absl::StrCat(what, ": exited with status ", run.exit_code));
  return std::move(run.output);
}

}  // namespace

absl::StatusOr<std::string> ResolveRuntimeProgram(const std::string& flag) {
  if (flag.empty() || flag == "none") return std::string();
  if (flag == "auto") {
    for (absl::string_view dir : absl::StrSplit(kRuntimePath, ':')) {
      const std::string candidate = absl::StrCat(dir, "/podman");
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return std::string();
  }
  if (flag[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--container-runtime: '", flag, "': auto, none or an absolute path"));
  }
  if (access(flag.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("--container-runtime ", flag, ": ", std::strerror(errno)));
  }
  return flag;
}

absl::StatusOr<RuntimeFacts> ContainerRuntime::Facts(absl::Duration max_age) {
  if (options_.program.empty()) return absl::FailedPreconditionError("no container runtime");
  if (MonotonicNow() - asked_at_ < max_age) return facts_;
  auto version =
      RunAndCapture(Command({"version", "--format", "{{.Client.Version}}"}), Environment(), absl::Seconds(10));
  if (!version.ok()) return version.status();
  auto images = RunAndCapture(Command({"images", "--noheading", "--format", "{{.Repository}}:{{.Tag}}"}), Environment(),
                              absl::Seconds(10));
  if (!images.ok()) return images.status();
  RuntimeFacts facts;
  const std::string base = options_.program.substr(options_.program.rfind('/') + 1);
  facts.name = base.empty() ? "podman" : base;
  facts.version = std::string(absl::StripAsciiWhitespace(*version));
  for (absl::string_view line : absl::StrSplit(*images, '\n', absl::SkipWhitespace())) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StrContains(line, "<none>")) continue;  // an untagged layer has no name to ask for
    facts.images.insert(std::string(line));
  }
  facts_ = std::move(facts);
  asked_at_ = MonotonicNow();
  return facts_;
}

std::map<std::string, std::string> ContainerRuntime::Environment() const {
  std::map<std::string, std::string> env{{"PATH", kRuntimePath}, {"LANG", "C.UTF-8"}, {"HOME", "/root"}};
  if (!options_.containers_conf.empty()) env["CONTAINERS_CONF"] = options_.containers_conf;
  return env;
}

std::vector<std::string> ContainerRuntime::Command(std::initializer_list<std::string> words) const {
  std::vector<std::string> argv{options_.program};
  argv.insert(argv.end(), options_.global_args.begin(), options_.global_args.end());
  argv.insert(argv.end(), words.begin(), words.end());
  return argv;
}

std::vector<std::string> ContainerRuntime::RunArgv(const ContainerRun& run) const {
  // The job's cgroup is a cgroupfs path; systemd's manager would want a slice name instead.
  std::vector<std::string> argv = run.cgroup_parent.empty() ? Command({}) : Command({"--cgroup-manager=cgroupfs"});
  argv.insert(argv.end(), {"run", "--rm", "--replace", "--name", run.name,
                           // torchrun's rendezvous and the collectives talk to other nodes directly,
                           // by the host's name (c10d hands out the rendezvous host's name).
                           "--network=host", "--uts=host",
                           // torchrun names each node "<host>_<pid>": in PID namespaces of their own
                           // every torchrun is pid 1, and two nodes on one host would be one to c10d.
                           // The host's pids are also what the vendor libraries list on the cards.
                           // A job sees no more than it would outside an image (its own uid's).
                           "--pid=host",
                           // The log is the agent's (the runtime's stdout); a second copy would fill
                           // the runtime's storage.
                           "--log-driver=none", "--user", absl::StrCat(run.uid, ":", run.gid), "--cap-drop=all",
                           "--security-opt=no-new-privileges",
                           // NCCL and gloo keep their buffers in /dev/shm, 64 MiB by default; it is
                           // charged to the job's cgroup like any memory.
                           "--shm-size=8g", "--env-file", run.env_file});
  for (gid_t g : run.groups) argv.insert(argv.end(), {"--group-add", absl::StrCat(g)});
  if (!run.cgroup_parent.empty()) argv.insert(argv.end(), {"--cgroup-parent", run.cgroup_parent});
  for (const auto& d : run.devices) argv.insert(argv.end(), {"--device", d});
  for (const auto& m : run.mounts) {
    argv.insert(argv.end(), {"--volume", absl::StrCat(m.source, ":", m.target, m.read_only ? ":ro" : "")});
  }
  if (!run.workdir.empty()) argv.insert(argv.end(), {"--workdir", run.workdir});
  argv.push_back(run.image);
  argv.insert(argv.end(), run.command.begin(), run.command.end());
  return argv;
}

void ContainerRuntime::Remove(const std::string& name) const {
  if (options_.program.empty()) return;
  if (auto done = RunAndCapture(Command({"rm", "--force", "--ignore", name}), Environment(), absl::Seconds(15));
      !done.ok()) {
    spdlog::warn("container {}: {}", name, std::string(done.status().message()));
  }
}

std::vector<std::string> SharedDeviceFiles(Vendor vendor, const std::string& dev_root) {
  std::vector<std::string> names;
  switch (vendor) {
    case Vendor::kNvidia: names = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}; break;
    case Vendor::kMetax: names = {"mxcd"}; break;
    case Vendor::kCambricon: names = {"cambricon_ctl"}; break;
    default: break;  // Intel: each card's /dev/dri nodes are its own
  }
  std::vector<std::string> out;
  for (const auto& n : names) {
    const std::string path = absl::StrCat(dev_root, "/", n);
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) out.push_back(path);
  }
  return out;
}

std::vector<ContainerMount> DriverLibraryMounts(Vendor vendor) {
  if (vendor != Vendor::kNvidia) return {};
  std::vector<ContainerMount> out;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
    for (const char* lib : {"libcuda.so*", "libnvidia-ml.so*", "libnvidia-ptxjitcompiler.so*", "libnvidia-nvvm.so*",
                            "libcudadebugger.so*"}) {
      glob_t found{};
      if (glob(absl::StrCat(dir, "/", lib).c_str(), 0, nullptr, &found) == 0) {
        for (size_t i = 0; i < found.gl_pathc; ++i) out.push_back({found.gl_pathv[i], found.gl_pathv[i], true});
      }
      globfree(&found);
    }
  }
  if (access("/usr/bin/nvidia-smi", X_OK) == 0) out.push_back({"/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", true});
  return out;
}

absl::StatusOr<std::vector<ContainerMount>> ResolveMounts(const std::vector<ContainerMount>& wanted,
                                                          const std::vector<std::string>& job_dirs,
                                                          const std::vector<std::string>& mount_dirs) {
  std::vector<ContainerMount> out;
  for (const auto& m : wanted) {
    const std::string real = RealPath(m.source);
    if (real.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("mount ", m.source, ": ", std::strerror(errno)));
    }
    const bool in_job_dir = ResolvesInside(real, job_dirs);
    const bool in_mount_dir = ResolvesInside(real, mount_dirs);
    if (!in_job_dir && !(in_mount_dir && m.read_only)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mount ", m.source, (real == m.source ? "" : absl::StrCat(" (", real, ")")),
          in_mount_dir ? ": only read-only here (it is in the agent's --container-mount-dirs, not a job dir)"
                       : ": outside the agent's --job-dirs and --container-mount-dirs"));
    }
    out.push_back({real, m.target.empty() ? m.source : m.target, m.read_only});
  }
  return out;
}

absl::StatusOr<std::string> EnvFileText(const std::map<std::string, std::string>& env) {
  std::string out;
  for (const auto& [k, v] : env) {
    if (absl::StrContains(v, '\n') || absl::StrContains(k, '\n') || absl::StrContains(k, '=')) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", k, ": a job in an image cannot pass a value with a newline"));
    }
    absl::StrAppend(&out, k, "=", v, "\n");
  }
  return out;
}

std::string RuntimeError(absl::string_view log_tail) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(log_tail, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, "Error: ")) last = std::string(line);
  }
  return last;
}

}  // namespace hetpool::agent
