#include "scheduler/framework/free_capacity_index.h"

#include <algorithm>
#include <limits>

namespace hetpool::scheduler {

void FreeCapacityIndex::Read(size_t index, const NodeView& node) {
  generations_[index] = node.generation;
  cpu_milli_free_[index] = node.cpu_milli_total > 0 ? node.cpu_milli_free : std::numeric_limits<int64_t>::max();
  host_memory_free_mib_[index] =
      node.host_memory_total_mib > 0 ? node.host_memory_free_mib : std::numeric_limits<uint64_t>::max();
  const size_t first = index * kVendors;
  std::fill_n(whole_free_.begin() + static_cast<std::ptrdiff_t>(first), kVendors, 0);
  std::fill_n(most_milli_free_.begin() + static_cast<std::ptrdiff_t>(first), kVendors, -1);
  for (const DeviceView& dv : node.devices) {
    const size_t slot = first + static_cast<size_t>(dv.device->vendor);
    if (dv.free && whole_free_[slot] < std::numeric_limits<uint8_t>::max()) ++whole_free_[slot];
    // A share is at most 1000 milli; anything above still holds every share.
    const int16_t milli = static_cast<int16_t>(std::clamp<int32_t>(dv.milli_free, -1, 1000));
    most_milli_free_[slot] = std::max(most_milli_free_[slot], milli);
  }
}

void FreeCapacityIndex::Sync(const std::vector<NodeView>& nodes) {
  const size_t n = nodes.size();
  if (generations_.size() != n) {
    generations_.assign(n, 0);
    cpu_milli_free_.assign(n, 0);
    host_memory_free_mib_.assign(n, 0);
    whole_free_.assign(n * kVendors, 0);
    most_milli_free_.assign(n * kVendors, -1);
    for (size_t i = 0; i < n; ++i) Read(i, nodes[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (nodes[i].generation == 0 || generations_[i] != nodes[i].generation) Read(i, nodes[i]);
  }
}

}  // namespace hetpool::scheduler
