#include "src/agent/log_shipper.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/agent/container_runtime.h"
#include "src/agent/rendezvous_port.h"
#include "src/agent/torchrun_failure.h"

namespace hetpool::agent {

namespace {

// The daemon holds the bytes before `pushed`: give their disk blocks back (the file keeps its
// size, so offsets stay as they were). Filesystems without holes keep the bytes; nothing else
// changes.
void ReleaseShippedBytes(int fd, uint64_t pushed) {
  if (pushed == 0 || pushed == UINT64_MAX) return;
  fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(pushed));
}

}  // namespace

bool LogShipper::SendChunk(const Runner::Key& key, ProcessRecord& r, absl::string_view data) {
  const ChunkAnswer answer = send_(key, r.log_pushed, data);
  if (answer.kind == ChunkAnswer::kUnknownJob) {
    r.log_pushed = UINT64_MAX;  // the daemon does not know the job (or this node in it): nothing to keep
    return true;
  }
  if (answer.kind != ChunkAnswer::kTaken) return false;
  r.log_pushed = answer.next_offset;
  r.log_tail.append(data.data(), data.size());
  if (r.log_tail.size() > kLogTailBytes) r.log_tail.erase(0, r.log_tail.size() - kLogTailBytes);
  return true;
}

bool LogShipper::Ship(std::map<Runner::Key, ProcessRecord>& records) {
  bool newly_flushed = false;
  std::string buf(chunk_bytes_, '\0');
  for (auto& [key, r] : records) {
    if (r.logs_flushed) continue;
    const bool was_exited = r.exited;  // read before the file, so no byte written after is missed
    // In the agent's own directory (job_paths.h), and never through a link all the same.
    const int fd = open(r.spec.log_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    bool failed = false;
    while (fd >= 0 && r.log_pushed != UINT64_MAX) {
      const ssize_t n = pread(fd, buf.data(), buf.size(), static_cast<off_t>(r.log_pushed));
      if (n <= 0) break;
      if (!SendChunk(key, r, absl::string_view(buf.data(), static_cast<size_t>(n)))) {
        failed = true;
        break;
      }
    }
    if (fd >= 0) {
      ReleaseShippedBytes(fd, r.log_pushed);
      close(fd);
    }
    // Nothing printed: an empty chunk all the same, so the daemon knows the log exists (and can
    // tell a missing one from an empty one).
    if (was_exited && !failed && r.log_pushed == 0) failed = !SendChunk(key, r, "");
    if (!was_exited || failed) continue;
    r.logs_flushed = true;
    newly_flushed = true;
    ReadFailureFromTail(r);
    r.log_tail.clear();
  }
  return newly_flushed;
}

void ReadFailureFromTail(ProcessRecord& r) {
  if (r.stopped_after_rank_failure) {
    // Stopped for lingering after a rank failed (Runner::StopLingering): that failure is its end.
    r.torchrun_failure = ParseTorchrunFailure(r.log_tail);
    if (!r.torchrun_failure) r.torchrun_failure = ParseFirstWorkerFailure(r.log_tail, r.global_ranks);
    return;
  }
  if (r.exit_code == 0 || r.kill_sent || !r.launch_failure.empty()) return;
  if (r.spec.container && r.exit_code == kRuntimeFailedExit) {
    // The runtime failed, not the job (a pull, a mount, a device): its own words say how.
    const std::string said = RuntimeError(r.log_tail);
    r.launch_failure = "ContainerFailed";
    r.message = absl::StrCat("container runtime failed (exit ", kRuntimeFailedExit, ") running image ",
                             r.spec.container->image, said.empty() ? "" : ": ", said);
    return;
  }
  if (r.spec.direct) {
    // No torchrun: the process's exit is the rank's own.
    r.torchrun_failure = DirectFailure(r.log_tail, 0, r.exit_code, r.signal);
    return;
  }
  // torchrun exits 1 whichever way a worker failed: its report, now all shipped, says which rank
  // and how.
  r.torchrun_failure = ParseTorchrunFailure(r.log_tail);
  if (!r.torchrun_failure && r.spec.hosted_rendezvous_port > 0 && SaysRendezvousBindFailed(r.log_tail)) {
    // Its store could not listen: a process took the port after the agent's check.
    r.launch_failure = kRendezvousPortTaken;
    r.message = absl::StrCat("torchrun could not listen on rendezvous port ", r.spec.hosted_rendezvous_port,
                             ": it is in use on this node by another process");
  }
}

}  // namespace hetpool::agent
