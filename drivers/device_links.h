// Builds DeviceRecord::links from what a vendor library says: fabric links to a peer (counted per
// link), and the PCIe relationship between every pair of the node's devices.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "hetpool/device.h"

namespace hetpool::drivers {

// Adds one lane of a fabric link from `from` to the device with id `peer`, merging lanes.
void AddFabricLane(DeviceRecord& from, const std::string& peer, LinkKind kind);

// For every ordered pair (i, j), i != j, without a fabric link between them, adds the PCIe
// relationship `relation(i, j)` returns (nothing when it returns nullopt).
void AddPcieLinks(std::vector<DeviceRecord>& devices,
                  const std::function<std::optional<LinkKind>(size_t, size_t)>& relation);

// PCI bus ids in one canonical form ("0000:17:00.0", lower case, 4-digit domain), so ids from
// NVML ("00000000:17:00.0"), CNDev (numbers) and sysfs compare equal.
std::string CanonicalBusId(const std::string& bus_id);
std::string FormatBusId(unsigned domain, unsigned bus, unsigned device, unsigned function);

}  // namespace hetpool::drivers
