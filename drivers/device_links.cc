#include "drivers/device_links.h"

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hetpool::drivers {

void AddFabricLane(DeviceRecord& from, const std::string& peer, LinkKind kind) {
  for (auto& link : from.links) {
    if (link.peer_device_id == peer && link.kind == kind) {
      ++link.count;
      return;
    }
  }
  from.links.push_back({peer, kind, 1});
}

void AddPcieLinks(std::vector<DeviceRecord>& devices,
                  const std::function<std::optional<LinkKind>(size_t, size_t)>& relation) {
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = 0; j < devices.size(); ++j) {
      if (i == j) continue;
      bool fabric = false;
      for (const auto& l : devices[i].links) fabric |= l.peer_device_id == devices[j].id;
      if (fabric) continue;
      if (auto kind = relation(i, j)) devices[i].links.push_back({devices[j].id, *kind, 1});
    }
  }
}

std::string FormatBusId(unsigned domain, unsigned bus, unsigned device, unsigned function) {
  return absl::StrFormat("%04x:%02x:%02x.%x", domain & 0xffff, bus, device, function);
}

std::string CanonicalBusId(const std::string& bus_id) {
  // [domain:]bus:device.function, hex fields of any width.
  std::vector<std::string> parts = absl::StrSplit(absl::AsciiStrToLower(bus_id), ':');
  if (parts.size() < 2 || parts.size() > 3) return absl::AsciiStrToLower(bus_id);
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  size_t i = 0;
  if (parts.size() == 3 && !absl::SimpleHexAtoi(parts[i++], &domain)) return bus_id;
  if (!absl::SimpleHexAtoi(parts[i++], &bus)) return bus_id;
  std::pair<std::string, std::string> df = absl::StrSplit(parts[i], absl::MaxSplits('.', 1));
  if (!absl::SimpleHexAtoi(df.first, &device)) return bus_id;
  if (!df.second.empty() && !absl::SimpleHexAtoi(df.second, &function)) return bus_id;
  return FormatBusId(domain, bus, device, function);
}

}  // namespace hetpool::drivers
