#include "src/daemon/state/claim_ledger.h"

#include <atomic>

#include <algorithm>

namespace hetpool::daemon {

Claims::Map& Claims::Changing() {
  // One sequence for every node's claims: a node that leaves and comes back under its name
  // never shows a revision its old claims had.
  static std::atomic<uint64_t> next{1};
  revision_ = next.fetch_add(1, std::memory_order_relaxed);
  if (on_change_) on_change_();
  return map_;
}

Holds HoldsByDevice(const Claims& claims) {
  Holds holds;
  for (const auto& [key, claim] : claims) {
    for (const auto& d : claim.device_ids) {
      DeviceHold& h = holds[d];
      if (std::find(h.jobs.begin(), h.jobs.end(), key.first) == h.jobs.end()) h.jobs.push_back(key.first);
      h.milli += claim.device_milli;
      if (claim.device_milli >= 1000) {
        h.whole = true;
      } else {
        h.fractional_memory_mib += claim.device_memory_mib;
      }
    }
  }
  return holds;
}

DeviceFree FreeOf(const DeviceRecord& device, const DeviceHold* hold) {
  if (hold == nullptr) return {true, 1000, device.memory_mib};
  DeviceFree free;
  free.whole = false;
  free.milli = std::max(0, 1000 - hold->milli);
  free.memory_mib = hold->whole || hold->fractional_memory_mib >= device.memory_mib
                        ? 0
                        : device.memory_mib - hold->fractional_memory_mib;
  return free;
}

DeviceAllocated AllocatedOf(const DeviceRecord& device, const DeviceHold* hold) {
  if (hold == nullptr) return {};
  if (hold->whole) return {1000, device.memory_mib};
  return {std::min(1000, hold->milli), std::min(device.memory_mib, hold->fractional_memory_mib)};
}

bool GivableWhole(const DeviceRecord& device, const DeviceHold* hold, bool node_schedulable) {
  return node_schedulable && device.Placeable() && FreeOf(device, hold).whole;
}

HostFree HostFreeOf(const NodeInventory& inventory, const Claims& claims) {
  HostFree free;
  free.cpu_milli_total = static_cast<int64_t>(inventory.cpus) * 1000;
  free.memory_total_mib = inventory.memory_mib;
  int64_t cpu_held = 0;
  uint64_t memory_held = 0;
  for (const auto& [key, claim] : claims) {  // claims being stopped still hold theirs
    cpu_held += claim.cpu_milli;
    memory_held += claim.host_memory_mib;
  }
  free.cpu_milli = std::max<int64_t>(0, free.cpu_milli_total - cpu_held);
  free.memory_mib = memory_held >= free.memory_total_mib ? 0 : free.memory_total_mib - memory_held;
  return free;
}

const DeviceHold* HoldOn(const Holds& holds, const std::string& device_id) {
  auto it = holds.find(device_id);
  return it == holds.end() ? nullptr : &it->second;
}

}  // namespace hetpool::daemon
