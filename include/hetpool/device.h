// Plain value types for a node's devices, shared by drivers/, scheduler/ and src/.
// The libraries know nothing of protobuf; src/common/convert.h maps these to the API messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetpool/vendor.h"

namespace hetpool {

enum class LinkKind {
  kNvLink, kMetaxLink, kMluLink, kXeLink,       // vendor fabrics
  kPcieSwitch, kPcieHostBridge, kSameNuma, kCrossSocket,  // PCIe relationships
};

struct Link {
  std::string peer_device_id;
  LinkKind kind = LinkKind::kCrossSocket;
  int count = 1;
};

struct DeviceRecord {
  std::string id;    // node-local: "<vendor><index>"
  int index = 0;     // vendor enumeration index, used in visibility variables
  Vendor vendor = Vendor::kNvidia;
  std::string model;
  std::string uuid;
  std::string pci_bus_id;
  int numa_node = -1;
  uint64_t memory_mib = 0;
  uint64_t memory_used_mib = 0;
  bool healthy = true;
  std::string health_message;
  std::string architecture;
  std::string driver_version;
  std::vector<Link> links;
};

struct NodeInventory {
  std::string hostname;
  int cpus = 0;
  uint64_t memory_mib = 0;
  std::vector<DeviceRecord> devices;
  std::string backend;
  bool simulated = false;
};

}  // namespace hetpool
