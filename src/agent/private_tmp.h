// A private /tmp per job generation, as systemd's PrivateTmp= and Slurm's job_container/tmpfs
// give: the job's processes see a fresh tmpfs at /tmp in a mount namespace of their own, so one
// job cannot read, plant or race files in another's /tmp, and everything it left there goes with
// its last process (the namespace, and the tmpfs with it, is freed then; the cgroup makes sure
// that moment comes). Its pages are charged to the job's memory cgroup, so the job's memory ask
// bounds it too.
//
// What the job needs from the host's /tmp stays where it was: its job directories and run
// directory when they lie under /tmp, and the NVIDIA MPS pipe directory (/tmp/nvidia-mps, MPS's
// default), each bound back at its own path.
//
// /dev/shm likewise (issue 60, item 5: a file bob's job wrote there was readable by alice's job
// and stayed, in RAM, after both ended): a tmpfs of the job's own in the same namespace, shared
// by its ranks on the node (NCCL's intra-node transport and PyTorch's DataLoader workers use it),
// sized by the job's memory limit when it has one (its pages are charged to the job's cgroup
// anyway). Not for a job on an MPS-shared card: MPS clients meet their server's shared memory in
// the host's /dev/shm (NVIDIA's device plugin mounts it into MPS clients for that reason).
//
// Split in two because the child may make only async-signal-safe calls after fork: the parent
// prepares everything (which paths, the strings), the child only makes system calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetpool::agent {

class PrivateTmp {
 public:
  // In the parent, before fork. `keep`: absolute paths the job must still reach; those under
  // /tmp that exist are bound back (others need nothing).
  // `shm_mib`: with `private_shm`, the size of the job's /dev/shm (0: tmpfs's default, half of
  // RAM).
  explicit PrivateTmp(const std::vector<std::string>& keep, bool private_shm = false, uint64_t shm_mib = 0);

  // In the forked child, as root, before it drops to the job's account: a new mount namespace
  // (mounts from the host still propagate in, none propagates out), a tmpfs on /tmp, the kept
  // paths bound back, and a tmpfs on /dev/shm when asked. Returns 0, or the errno of the step
  // that failed.
  int EnterInChild();

  // The paths bound back (for the agent's log and tests).
  const std::vector<std::string>& kept() const { return kept_; }

 private:
  struct Bind {
    std::string target;
    int fd = -1;           // the directory, opened in the child before /tmp is covered
    char source[32] = {};  // "/proc/self/fd/<fd>"
  };
  std::vector<std::string> kept_;
  std::vector<std::string> dirs_to_make_;  // in the tmpfs, parents first
  std::vector<Bind> binds_;
  bool private_shm_ = false;
  char shm_options_[64] = {};  // "mode=1777[,size=NNNm]", made before fork
};

// Whether `path` is /tmp or lies under it (what a private /tmp would hide).
bool UnderTmp(const std::string& path);

}  // namespace hetpool::agent
