#include "drivers/sysfs/sysfs_pci.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "drivers/device_links.h"

namespace hetpool::drivers {
namespace fs = std::filesystem;
namespace {

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

unsigned ReadHex(const fs::path& path) {
  unsigned value = 0;
  const std::string line = ReadLine(path);
  absl::string_view text = line;
  absl::ConsumePrefix(&text, "0x");
  (void)absl::SimpleHexAtoi(text, &value);
  return value;
}

bool IsAcceleratorClass(unsigned class_code) {
  const unsigned base_sub = class_code >> 8;  // drop the programming interface
  return base_sub == 0x0302 || base_sub == 0x0380 || base_sub == 0x1200;
}

}  // namespace

std::optional<Vendor> VendorOfPciId(unsigned vendor_id) {
  switch (vendor_id) {
    case 0x10de: return Vendor::kNvidia;
    case 0x9999: return Vendor::kMetax;  // MetaX Integrated Circuits
    case 0xcabc: return Vendor::kCambricon;
    case 0x8086: return Vendor::kIntel;
    default: return std::nullopt;
  }
}

SysfsPci::SysfsPci(std::string sysfs_root, std::string pci_ids_path)
    : root_(std::move(sysfs_root)), pci_ids_(std::move(pci_ids_path)) {
  if (pci_ids_.empty()) {
    for (const char* candidate : {"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"}) {
      if (fs::exists(candidate)) {
        pci_ids_ = candidate;
        break;
      }
    }
  }
}

std::optional<PciLocation> SysfsPci::Locate(const std::string& bus_id) const {
  const std::string canonical = CanonicalBusId(bus_id);
  const fs::path link = fs::path(root_) / "bus/pci/devices" / canonical;
  std::error_code ec;
  const fs::path real = fs::canonical(link, ec);
  if (ec) return std::nullopt;
  PciLocation loc;
  loc.bus_id = canonical;
  // .../devices/pci0000:16/0000:16:01.0/0000:17:00.0/0000:18:00.0
  bool in_tree = false;
  for (const auto& part : real) {
    const std::string name = part.string();
    if (name.rfind("pci", 0) == 0 && name.find(':') != std::string::npos) in_tree = true;
    if (in_tree) loc.path.push_back(name);
  }
  const std::string numa = ReadLine(real / "numa_node");
  int node = -1;
  if (absl::SimpleAtoi(numa, &node)) loc.numa_node = node;
  loc.local_cpus = ReadLine(real / "local_cpulist");
  loc.vendor_id = ReadHex(real / "vendor");
  loc.device_id = ReadHex(real / "device");
  loc.class_code = ReadHex(real / "class");
  return loc;
}

LinkKind SysfsPci::Relationship(const PciLocation& a, const PciLocation& b) {
  // Length of the common path above both devices (excluding the devices themselves).
  size_t common = 0;
  while (common + 1 < a.path.size() && common + 1 < b.path.size() && a.path[common] == b.path[common]) ++common;
  // path[0] root complex, path[1] root port, path[2] switch upstream port, ...
  if (common >= 3) return LinkKind::kPcieSwitch;
  if (common >= 1) return LinkKind::kPcieHostBridge;
  if (a.numa_node >= 0 && a.numa_node == b.numa_node) return LinkKind::kSameNuma;
  return LinkKind::kCrossSocket;
}

std::vector<PciLocation> SysfsPci::Accelerators() const {
  std::vector<PciLocation> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(root_) / "bus/pci/devices", ec)) {
    auto loc = Locate(entry.path().filename().string());
    if (!loc || !IsAcceleratorClass(loc->class_code) || !VendorOfPciId(loc->vendor_id)) continue;
    out.push_back(*std::move(loc));
  }
  std::sort(out.begin(), out.end(), [](const PciLocation& x, const PciLocation& y) { return x.bus_id < y.bus_id; });
  return out;
}

std::string SysfsPci::DeviceName(unsigned vendor_id, unsigned device_id) const {
  if (pci_ids_.empty()) return "";
  std::ifstream in(pci_ids_);
  const std::string vendor_key = absl::StrFormat("%04x", vendor_id);
  const std::string device_key = absl::StrFormat("%04x", device_id);
  std::string line, vendor_name;
  bool in_vendor = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != '\t') {
      in_vendor = line.rfind(vendor_key, 0) == 0;
      if (in_vendor) vendor_name = std::string(absl::StripAsciiWhitespace(line.substr(4)));
      continue;
    }
    if (in_vendor && line.size() > 1 && line[1] != '\t' && line.compare(1, 4, device_key) == 0) {
      return absl::StrCat(vendor_name, " ", absl::StripAsciiWhitespace(line.substr(5)));
    }
  }
  return "";
}

void SysfsPci::Complete(std::vector<DeviceRecord>& devices) const {
  std::vector<std::optional<PciLocation>> locations;
  for (auto& d : devices) {
    locations.push_back(d.pci_bus_id.empty() ? std::nullopt : Locate(d.pci_bus_id));
    if (!locations.back()) continue;
    if (d.numa_node < 0) d.numa_node = locations.back()->numa_node;
    if (d.local_cpus.empty()) d.local_cpus = locations.back()->local_cpus;
  }
  AddPcieLinks(devices, [&](size_t i, size_t j) -> std::optional<LinkKind> {
    // Only pairs the vendor library left without any relationship.
    for (const auto& l : devices[i].links) {
      if (l.peer_device_id == devices[j].id) return std::nullopt;
    }
    if (!locations[i] || !locations[j]) return std::nullopt;
    return Relationship(*locations[i], *locations[j]);
  });
}

absl::StatusOr<std::vector<DeviceRecord>> SysfsBackend::Discover() {
  std::vector<DeviceRecord> devices;
  std::map<Vendor, int> next_index;
  for (const auto& loc : pci_.Accelerators()) {
    DeviceRecord d;
    d.vendor = *VendorOfPciId(loc.vendor_id);
    d.index = next_index[d.vendor]++;
    d.id = absl::StrCat(VendorName(d.vendor), d.index);
    d.pci_bus_id = loc.bus_id;
    d.numa_node = loc.numa_node;
    d.local_cpus = loc.local_cpus;
    d.model = pci_.DeviceName(loc.vendor_id, loc.device_id);
    if (d.model.empty()) d.model = absl::StrFormat("pci %04x:%04x", loc.vendor_id, loc.device_id);
    // No vendor library: memory and health are unknown, which the health message says.
    d.health_message = "seen on the PCIe bus only (no vendor management library)";
    devices.push_back(std::move(d));
  }
  pci_.Complete(devices);
  return devices;
}

}  // namespace hetpool::drivers
