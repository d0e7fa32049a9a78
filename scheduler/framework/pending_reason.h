// Why a job waits, in fields rather than prose: what it needs, how close the pool comes, which
// filter turned how many nodes away, and whether waiting can help at all. Travels with the
// placement error as an absl::Status payload, so every PlacementPolicy keeps one signature.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hetpool::scheduler {

struct PendingReason {
  bool never = false;                         // no node of the pool could ever run it (vs waiting for capacity)
  std::string needs;                          // "1 node x 8 devices of one vendor (bf16, >= 80 GiB)"
  std::string closest;                        // "most free qualifying devices on one node: 4 (node-12)"
  std::map<std::string, int> nodes_rejected;  // filter plugin -> nodes it turned away
  std::vector<std::string> device_reasons;    // a few distinct reasons devices failed (CanRun's words)
  std::map<std::string, std::string>
      waiting_reasons;  // filter plugin -> the first reason it made devices or nodes wait

  // One line: "waiting for capacity: needs ...; closest ...; rejected: Capacity 3 nodes, ..."
  std::string Message() const;
  bool operator==(const PendingReason&) const = default;
};

// Adds the reason to a non-OK status (its message is left as it is).
void AttachPendingReason(absl::Status& status, const PendingReason& reason);
std::optional<PendingReason> PendingReasonOf(const absl::Status& status);
// Whether `status` carries one, without decoding it: a pass asks this of every waiting job.
bool HasPendingReason(const absl::Status& status);

}  // namespace hetpool::scheduler
