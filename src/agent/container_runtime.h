// Jobs in container images (JobSpec.container, docs/containers.md): the node's OCI runtime CLI
// (podman; its OCI runtime, runc or crun, is the operator's choice through --container-runtime-args
// and containers.conf), what it reports for the inventory, and the exact command line that runs
// one node's share of a job in its image.
//
// The runtime runs as root (it sets up the container), so nothing of the job reaches its own
// process: the job's environment goes through an --env-file the agent writes where only it can,
// its mounts are resolved by the agent first (ResolveMounts), and the container's processes run
// as the job's account, with no capabilities, inside the job's cgroup (--cgroup-parent).
#pragma once

#include <sys/types.h>

#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hetpool/vendor.h"

namespace hetpool::agent {

struct ContainerRuntimeOptions {
  std::string program;                   // absolute path of the runtime's CLI; "" = no runtime
  std::vector<std::string> global_args;  // before "run": "--runtime=/usr/sbin/runc", ...
  std::string containers_conf;           // CONTAINERS_CONF for the runtime ("" = its default)
  // Host directories (besides the job dirs) whose contents jobs may mount, read-only.
  std::vector<std::string> mount_dirs;
};

// "auto": podman on the standard PATH, if there; "none" or "": no runtime; else an absolute path.
absl::StatusOr<std::string> ResolveRuntimeProgram(const std::string& flag);

struct RuntimeFacts {
  std::string name;              // "podman"
  std::string version;           // "4.3.1"
  std::set<std::string> images;  // "localhost/torch:2.4", as `podman images` names them
};

struct ContainerMount {
  std::string source;  // a real path on the host (ResolveMounts)
  std::string target;
  bool read_only = false;
};

// One node's share of a job, in its image.
struct ContainerRun {
  std::string name;  // unique per node, job and generation: a leftover is replaced
  std::string image;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (the cards' device files may need them)
  std::string cgroup_parent;  // the job's cgroup, relative to the hierarchy root; "" = none
  std::string env_file;
  std::string workdir;
  std::vector<std::string> devices;  // host device files, passed at the same path
  std::vector<ContainerMount> mounts;
  std::vector<std::string> command;  // torchrun's argv (argv[0] found on the image's PATH)
};

class ContainerRuntime {
 public:
  explicit ContainerRuntime(ContainerRuntimeOptions options) : options_(std::move(options)) {}
  const ContainerRuntimeOptions& options() const { return options_; }

  // The runtime's name, version and local images, asked anew when older than `max_age` or
  // after Invalidate() (a job may have pulled an image). An error when the runtime does not answer.
  absl::StatusOr<RuntimeFacts> Facts(absl::Duration max_age = absl::Seconds(30));
  void Invalidate() { asked_at_ = absl::InfinitePast(); }

  // The runtime's own environment: a fixed PATH and its configuration, nothing of the job's.
  std::map<std::string, std::string> Environment() const;
  // The command line that runs `run` (argv[0] is options().program).
  std::vector<std::string> RunArgv(const ContainerRun& run) const;
  // Removes what is left of a container once its job ended (a SIGKILLed runtime leaves its
  // record behind). Best effort: waits at most a few seconds.
  void Remove(const std::string& name) const;

  // The runtime's CLI with the operator's global options, then `words`.
  std::vector<std::string> Command(std::initializer_list<std::string> words) const;

 private:
  ContainerRuntimeOptions options_;
  RuntimeFacts facts_;
  absl::Time asked_at_ = absl::InfinitePast();
};

// The device files every card of `vendor` shares, which a container needs besides each card's
// own (/dev/nvidiactl, /dev/nvidia-uvm; /dev/mxcd; /dev/cambricon_ctl): those that exist under
// `dev_root`.
std::vector<std::string> SharedDeviceFiles(Vendor vendor, const std::string& dev_root = "/dev");

// The host's user-space driver libraries the vendor's container toolkit would mount (NVIDIA:
// libcuda, libnvidia-ml and the JIT libraries, and nvidia-smi; they must match the host's kernel
// driver, so an image cannot carry them), as read-only mounts at their own paths. Empty for
// vendors whose images carry their own user-space stack.
std::vector<ContainerMount> DriverLibraryMounts(Vendor vendor);

// The job's mounts, each source resolved (symlinks followed) by the agent: inside a job dir
// (read-write allowed), or inside one of `mount_dirs` (read-only only). FAILED_PRECONDITION
// naming the mount otherwise.
absl::StatusOr<std::vector<ContainerMount>> ResolveMounts(const std::vector<ContainerMount>& wanted,
                                                          const std::vector<std::string>& job_dirs,
                                                          const std::vector<std::string>& mount_dirs);

// podman's --env-file format, one KEY=VALUE a line; INVALID_ARGUMENT for a value with a newline
// (the format has no quoting).
absl::StatusOr<std::string> EnvFileText(const std::map<std::string, std::string>& env);

// What the runtime said when it failed itself (exit 125): its last "Error: " line in the log's
// tail, or "" when there is none.
std::string RuntimeError(absl::string_view log_tail);

// Why a launch in an image cannot start on a node without a runtime.
inline constexpr const char* kNoRuntime =
    "not started: this node has no container runtime (hetpool-agent --container-runtime)";

// The exit code podman gives when it, not the container's command, failed (a pull, a mount, a
// device).
inline constexpr int kRuntimeFailedExit = 125;

}  // namespace hetpool::agent
