// Keeps a node's device list stable across refreshes. Vendor libraries renumber cards when one
// drops off the bus, so ids are kept per UUID (or PCI bus id); a card that stops being reported is
// kept, marked unhealthy, so the daemon sees it fail instead of silently vanish.
#pragma once

#include <map>
#include <string>

#include "hetpool/device.h"

namespace hetpool::drivers {

class InventoryTracker {
 public:
  NodeInventory Update(NodeInventory fresh);
  // The stable id given to the card `d` names (by UUID, else PCI bus id, else the backend's id)
  // at an earlier Update, "" for a card no Update has seen.
  std::string IdOf(const DeviceRecord& d) const;

 private:
  static std::string KeyOf(const DeviceRecord& d);
  std::map<std::string, std::string> id_of_;       // key -> id first given to that card
  std::map<std::string, DeviceRecord> last_seen_;  // key -> last record (for vanished cards)
};

}  // namespace hetpool::drivers
