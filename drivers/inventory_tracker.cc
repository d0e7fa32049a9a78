#include "drivers/inventory_tracker.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace hetpool::drivers {

std::string InventoryTracker::KeyOf(const DeviceRecord& d) {
  if (!d.uuid.empty()) return "uuid:" + d.uuid;
  if (!d.pci_bus_id.empty()) return "bus:" + d.pci_bus_id;
  return "id:" + d.id;
}

std::string InventoryTracker::IdOf(const DeviceRecord& d) const {
  auto it = id_of_.find(KeyOf(d));
  return it == id_of_.end() ? "" : it->second;
}

NodeInventory InventoryTracker::Update(NodeInventory fresh) {
  std::set<std::string> used;
  for (const auto& [key, id] : id_of_) used.insert(id);
  std::map<std::string, std::string> stable;  // backend id -> stable id
  std::set<std::string> present;
  std::vector<const DeviceRecord*> unknown;
  for (const auto& d : fresh.devices) {
    const std::string key = KeyOf(d);
    present.insert(key);
    if (auto it = id_of_.find(key); it != id_of_.end()) {
      stable[d.id] = it->second;
    } else {
      unknown.push_back(&d);
    }
  }
  // A new card keeps the backend's id when that is free, else takes the next free "<vendor>N".
  for (const DeviceRecord* d : unknown) {
    std::string id = d->id;
    for (int n = 0; used.contains(id); ++n) id = absl::StrCat(VendorName(d->vendor), n);
    used.insert(id);
    id_of_[KeyOf(*d)] = id;
    stable[d->id] = id;
  }
  for (auto& d : fresh.devices) {
    d.id = stable[d.id];
    for (auto& l : d.links) {
      if (auto it = stable.find(l.peer_device_id); it != stable.end()) l.peer_device_id = it->second;
    }
    last_seen_[KeyOf(d)] = d;
  }
  // Cards seen before but not now stay listed, unhealthy, so jobs and operators learn of it.
  for (const auto& [key, record] : last_seen_) {
    if (present.contains(key)) continue;
    DeviceRecord gone = record;
    gone.healthy = false;
    gone.health_message = "no longer reported: removed or fallen off the bus";
    gone.utilization_percent = -1;
    gone.links.clear();
    fresh.devices.push_back(std::move(gone));
  }
  return fresh;
}

}  // namespace hetpool::drivers
