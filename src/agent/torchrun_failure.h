// Which rank of a node failed and how, read from what torchrun printed when it gave up: its
// "Root Cause (first observed failure)" report names the global and local rank and the worker's
// exit code (negative: the signal), and the lines the node printed before it are the rank's last
// words. torchrun itself only ever exits 1, so without this the script's own code is lost.
// The text is the end of the node's log as the agent pushed it to the daemon (the agent reads its
// own log file, never a file the job could write).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/common/torchrun_lines.h"

namespace hetpool::agent {

struct TorchrunFailure {
  int global_rank = -1;
  int local_rank = -1;
  int exit_code = 0;   // the worker's own exit status; 0 when a signal ended it
  std::string signal;  // "SIGSEGV" when a signal ended it
  // The last lines printed before torchrun's report (at most kMaxLastLines, torchrun's own log
  // lines left out): the failing local rank's last stdout lines ("[default1]:" stripped), then
  // the node's last stderr lines (workers' stderr is not prefixed), so an error comes last.
  std::vector<std::string> last_lines;
};

// nullopt when the text holds no torchrun failure report (torchrun killed, or not torchrun).
std::optional<TorchrunFailure> ParseTorchrunFailure(absl::string_view log);

// The first worker failure torchrun logged ("failed (exitcode: 1) local_rank: 0 (pid: 4242) of
// binary: ..."), as soon as it logs it: before its report, which a torchrun waiting at its exit
// barrier (for a peer node stuck in a collective) prints only minutes later. The global rank is
// `global_ranks`[local rank] when known, else -1.
std::optional<TorchrunFailure> ParseFirstWorkerFailure(absl::string_view log, const std::vector<int>& global_ranks);

// The failure of a process the agent started itself, without torchrun (one node, one process):
// no report to read, its exit is its own (`exit_code`, or `signal` when one ended it), and its last
// lines are the end of its output, none of it torchrun's.
TorchrunFailure DirectFailure(absl::string_view log, int global_rank, int exit_code, int signal);

}  // namespace hetpool::agent
