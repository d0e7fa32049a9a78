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
// Split in two because the child may make only async-signal-safe calls after fork: the parent
// prepares everything (which paths, the strings), the child only makes system calls.
#pragma once

#include <string>
#include <vector>

namespace hetpool::agent {

class PrivateTmp {
 public:
  // In the parent, before fork. `keep`: absolute paths the job must still reach; those under
  // /tmp that exist are bound back (others need nothing).
  explicit PrivateTmp(const std::vector<std::string>& keep);

  // In the forked child, as root, before it drops to the job's account: a new mount namespace
  // (mounts from the host still propagate in, none propagates out), a tmpfs on /tmp, the kept
  // paths bound back. Returns 0, or the errno of the step that failed.
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
};

// Whether `path` is /tmp or lies under it (what a private /tmp would hide).
bool UnderTmp(const std::string& path);

}  // namespace hetpool::agent
