// What a failed rank's last lines say about the hardware under it. A job that dies with CUDA's
// "uncorrectable ECC error encountered" did nothing wrong: the card did, and running the job
// again on the same card fails it again (issue 61: ten one-card jobs in a row landed on one bad
// card and all failed, each reported as the job's own failure). The table lists the messages the
// vendors' runtimes and collective libraries print for such faults, each with where it comes from
// and whether it points at the card or at the node (its network, its driver).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace hetpool::daemon {

enum class FaultScope {
  kCard,   // the card the rank ran on
  kNode,   // the node: its network or system (every card of it is suspect alike)
  kPeers,  // a peer or the network between: nothing here is more suspect than there
};

struct HardwareSignature {
  const char* text;  // matched case-sensitively, anywhere in a line
  const char* what;  // "uncorrectable ECC error" (for events and `get`)
  FaultScope scope;
  const char* source;  // where the text comes from
};

// The table, in the order it is matched (the most specific first).
const std::vector<HardwareSignature>& HardwareSignatures();

struct HardwareEvidence {
  const HardwareSignature* signature = nullptr;
  std::string line;  // the line that matched, as printed
};

// The last of `lines` (a failed rank's last lines) that carries a hardware signature; nullopt
// when none does (the failure is taken as the job's own).
std::optional<HardwareEvidence> FindHardwareSignature(const std::vector<std::string>& lines);

}  // namespace hetpool::daemon
