// FreeCapacityIndex: what each node of the views has free, per vendor (whole cards, the largest
// share left on one card) and on its host (CPU, memory), in flat arrays kept by the views'
// generations. A decision asks it which nodes could hold the job's ask at all and reads only
// those nodes' summaries: at 5,000 nodes with 90% of the cards in use, walking every node's
// summary (a cache miss or two each) was most of a placement's cost. The arrays are by field,
// not by node, so the walk over every node reads a few bytes per node.
//
// It answers for the Capacity device filter and the HostResources node filter alone, and only
// "certainly not": a node it lets through may still be turned away by any filter. A profile
// without those filters does not use it (Framework decides).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "scheduler/placement_policy.h"

namespace hetpool::scheduler {

class FreeCapacityIndex {
 public:
  // Brings the entries up to date with `nodes` (by index in the views): a node whose generation
  // is unchanged keeps its entry; one with generation 0 (unknown) is read every time.
  void Sync(const std::vector<NodeView>& nodes);

  // The views' generations as of the last Sync, in view order (what RefusalMemo keys on).
  std::span<const uint64_t> generations() const { return generations_; }

  // The first node at or after `from` whose bits say it may hold `request`'s per-node device ask
  // (nodes.size() when none): bit sets by whole cards free (1 to 8) and by the share left on one
  // card (in tenths), so the walk jumps over full nodes 64 at a time instead of asking each. A
  // superset of MayHold's device part: MayHold still decides. Asks of more than 8 whole cards,
  // or none, are not skipped over.
  size_t NextMayHold(size_t from, const PlacementRequest& request) const;
  // False when node `index` cannot hold `request`'s per-node ask from one vendor's cards: fewer
  // than devices_per_node whole free cards of every vendor, or (a share) no card with the share
  // left. With `host`, also false when its host lacks the CPU or memory asked free.
  bool MayHold(size_t index, const PlacementRequest& request, bool host) const {
    if (host && ((request.cpu_milli > 0 && request.cpu_milli > cpu_milli_free_[index]) ||
                 (request.host_memory_mib > 0 && request.host_memory_mib > host_memory_free_mib_[index]))) {
      return false;
    }
    const size_t first = index * kVendors;
    if (request.Fractional()) {
      for (size_t v = 0; v < kVendors; ++v) {
        if (most_milli_free_[first + v] >= request.device_milli) return true;
      }
      return false;
    }
    for (size_t v = 0; v < kVendors; ++v) {
      if (whole_free_[first + v] >= request.devices_per_node) return true;
    }
    return false;
  }

 private:
  static constexpr size_t kVendors = static_cast<size_t>(Vendor::kCpu) + 1;
  static constexpr size_t kWholeLevels = 8;   // at least 1..8 whole cards free of one vendor
  static constexpr size_t kShareLevels = 11;  // a card with at least 0, 100, ..., 1000 milli left
  void Read(size_t index, const NodeView& node);
  void SetBits(size_t index);

  std::vector<uint64_t> generations_;
  // Host room: a node that reports no total is not limited (the filter's rule).
  std::vector<int64_t> cpu_milli_free_;
  std::vector<uint64_t> host_memory_free_mib_;
  // Per node, kVendors entries each: cards free as a whole, and the largest share left on one
  // card (-1: no card of that vendor).
  std::vector<uint8_t> whole_free_;
  std::vector<int16_t> most_milli_free_;
  // Bit sets by node index (64 nodes a word): whole_at_least_[k - 1] has the nodes where one
  // vendor has k whole cards free; share_at_least_[t] those with a card of t x 100 milli left.
  std::array<std::vector<uint64_t>, kWholeLevels> whole_at_least_;
  std::array<std::vector<uint64_t>, kShareLevels> share_at_least_;
};

}  // namespace hetpool::scheduler
