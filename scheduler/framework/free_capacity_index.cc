#include "scheduler/framework/free_capacity_index.h"

#include <algorithm>
#include <bit>
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
  SetBits(index);
}

void FreeCapacityIndex::SetBits(size_t index) {
  const size_t first = index * kVendors;
  const auto whole = whole_free_.begin() + static_cast<std::ptrdiff_t>(first);
  const auto milli = most_milli_free_.begin() + static_cast<std::ptrdiff_t>(first);
  const int most_whole = *std::max_element(whole, whole + kVendors);
  const int most_milli = *std::max_element(milli, milli + kVendors);
  const size_t word = index / 64;
  const uint64_t bit = uint64_t{1} << (index % 64);
  auto put = [&](std::vector<uint64_t>& set, bool on) { set[word] = on ? set[word] | bit : set[word] & ~bit; };
  for (size_t k = 0; k < kWholeLevels; ++k) put(whole_at_least_[k], most_whole >= static_cast<int>(k) + 1);
  for (size_t t = 0; t < kShareLevels; ++t) put(share_at_least_[t], most_milli >= static_cast<int>(t) * 100);
}

size_t FreeCapacityIndex::NextMayHold(size_t from, const PlacementRequest& request) const {
  const size_t n = generations_.size();
  const std::vector<uint64_t>* set = nullptr;
  if (request.Fractional()) {
    set = &share_at_least_[static_cast<size_t>(std::clamp(request.device_milli / 100, 0, 10))];
  } else if (request.devices_per_node >= 1 && static_cast<size_t>(request.devices_per_node) <= kWholeLevels) {
    set = &whole_at_least_[static_cast<size_t>(request.devices_per_node) - 1];
  }
  if (set == nullptr || from >= n) return std::min(from, n);
  size_t word = from / 64;
  uint64_t bits = (*set)[word] & (~uint64_t{0} << (from % 64));
  while (bits == 0) {
    if (++word >= set->size()) return n;
    bits = (*set)[word];
  }
  return std::min(n, word * 64 + static_cast<size_t>(std::countr_zero(bits)));
}

void FreeCapacityIndex::Sync(const std::vector<NodeView>& nodes) {
  const size_t n = nodes.size();
  if (generations_.size() != n) {
    generations_.assign(n, 0);
    cpu_milli_free_.assign(n, 0);
    host_memory_free_mib_.assign(n, 0);
    whole_free_.assign(n * kVendors, 0);
    most_milli_free_.assign(n * kVendors, -1);
    for (auto& set : whole_at_least_) set.assign((n + 63) / 64, 0);
    for (auto& set : share_at_least_) set.assign((n + 63) / 64, 0);
    for (size_t i = 0; i < n; ++i) Read(i, nodes[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (nodes[i].generation == 0 || generations_[i] != nodes[i].generation) Read(i, nodes[i]);
  }
}

}  // namespace hetpool::scheduler
