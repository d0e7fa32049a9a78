// What torchrun writes around a job's own output, read by the agent (which rank failed,
// src/agent/torchrun_failure.h) and by the daemon (log labels, src/daemon/logs/log_filter.h):
// the "[<role><local rank>]:" tag --tee puts before each line of a worker's stdout, and
// torchrun's own lines (its Python logging and the OMP_NUM_THREADS banner).
#pragma once

#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace hetpool {

// What is kept of a failing rank's last lines (RankFailure.last_lines): the agent keeps no more,
// and the daemon cuts a report that carries more.
inline constexpr size_t kMaxLastLines = 10;
inline constexpr size_t kMaxLineBytes = 300;

struct TorchrunRankTag {
  int local_rank = 0;
  size_t length = 0;  // bytes of the tag, colon included
};
// The tag at the start of `line` ("[default3]:", any role name), if it has one.
std::optional<TorchrunRankTag> RankTagOf(absl::string_view line);

// torchrun's INFO and WARNING log lines and its banner: nothing a job's reader needs (the
// RendezvousConnectionError warning at the end of every successful multi-node job among them).
bool IsTorchrunChatter(absl::string_view line);
// Any of torchrun's own lines: the chatter, and its DEBUG, ERROR and CRITICAL log lines.
bool IsTorchrunOwn(absl::string_view line);

// torchrun's log lines come in two forms: PyTorch 1.x's Python logging
// ("ERROR:torch.distributed.elastic...: ..."), and since 2.x glog's
// ("E1204 17:52:38.786000 515 torch/distributed/elastic/...py:986] ..."). The start of one.
bool StartsTorchrunLogLine(absl::string_view text);
// Where in `text` (after its first byte) a torchrun log line starts: a job's last line written
// without a newline runs straight into what torchrun logs next. npos when none does.
size_t FindTorchrunLogLine(absl::string_view text);
// Where the end of `text` may be the start of a torchrun log line that more bytes would show
// (for a reader that sees the log in pieces), or npos.
size_t UnjudgedTorchrunStart(absl::string_view text);

}  // namespace hetpool
