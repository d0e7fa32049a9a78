#include "drivers/inventory_json.h"

#include <array>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "drivers/fingerprint/spec_table.h"

namespace hetpool::drivers {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<LinkKind, absl::string_view>, 8> kLinkNames = {{
    {LinkKind::kNvLink, "nvlink"},
    {LinkKind::kMetaxLink, "metaxlink"},
    {LinkKind::kMluLink, "mlulink"},
    {LinkKind::kXeLink, "xelink"},
    {LinkKind::kPcieSwitch, "pcie_switch"},
    {LinkKind::kPcieHostBridge, "pcie_host_bridge"},
    {LinkKind::kSameNuma, "same_numa"},
    {LinkKind::kCrossSocket, "cross_socket"},
}};

// Small typed accessors so every error says which field was wrong.
class FieldReader {
 public:
  FieldReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

  absl::Status CheckKnownKeys(const std::set<absl::string_view>& known) const {
    for (const auto& [key, value] : object_.items()) {
      if (!known.contains(key)) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ".", key, ": unknown field"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status String(absl::string_view key, std::string* out, bool required = false) const {
    auto it = object_.find(key);
    if (it == object_.end()) return Missing(key, required);
    if (!it->is_string()) return TypeError(key, "a string");
    *out = it->get<std::string>();
    return absl::OkStatus();
  }

  template <typename Int>
  absl::Status Integer(absl::string_view key, Int* out, long long min, bool required = false) const {
    auto it = object_.find(key);
    if (it == object_.end()) return Missing(key, required);
    if (!it->is_number_integer()) return TypeError(key, "an integer");
    const long long value = it->get<long long>();
    if (value < min) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ".", key, ": must be at least ", min, ", got ", value));
    }
    *out = static_cast<Int>(value);
    return absl::OkStatus();
  }

  absl::Status Bool(absl::string_view key, bool* out) const {
    auto it = object_.find(key);
    if (it == object_.end()) return absl::OkStatus();
    if (!it->is_boolean()) return TypeError(key, "true or false");
    *out = it->get<bool>();
    return absl::OkStatus();
  }

  std::string Path(absl::string_view key) const { return absl::StrCat(path_, ".", key); }

 private:
  absl::Status Missing(absl::string_view key, bool required) const {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(path_, ".", key, ": required"));
  }
  absl::Status TypeError(absl::string_view key, absl::string_view expected) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ".", key, ": must be ", expected));
  }

  const json& object_;
  std::string path_;
};

absl::StatusOr<Link> ParseLink(const json& j, const std::string& path) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": must be an object"));
  FieldReader r(j, path);
  if (auto s = r.CheckKnownKeys({"peer", "kind", "count"}); !s.ok()) return s;
  Link link;
  std::string kind;
  if (auto s = r.String("peer", &link.peer_device_id, true); !s.ok()) return s;
  if (auto s = r.String("kind", &kind, true); !s.ok()) return s;
  if (auto s = r.Integer("count", &link.count, 1); !s.ok()) return s;
  auto parsed = ParseLinkKind(kind);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(r.Path("kind"), ": ", parsed.status().message()));
  }
  link.kind = *parsed;
  return link;
}

absl::StatusOr<DeviceRecord> ParseDevice(const json& j, const std::string& path) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": must be an object"));
  FieldReader r(j, path);
  if (auto s = r.CheckKnownKeys({"id",
                                 "index",
                                 "vendor",
                                 "model",
                                 "uuid",
                                 "pci_bus_id",
                                 "numa_node",
                                 "memory_mib",
                                 "memory_used_mib",
                                 "healthy",
                                 "health_message",
                                 "architecture",
                                 "driver_version",
                                 "links",
                                 "serial",
                                 "local_cpus",
                                 "utilization_percent",
                                 "fingerprint",
                                 "capability",
                                 "device_nodes"});
      !s.ok()) {
    return s;
  }
  DeviceRecord d;
  d.index = -1;
  std::string vendor;
  if (auto s = r.String("vendor", &vendor, true); !s.ok()) return s;
  auto parsed_vendor = ParseVendor(vendor);
  if (!parsed_vendor || *parsed_vendor == Vendor::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.Path("vendor"), ": unknown device vendor '", vendor,
                     "' (devices are nvidia, metax, cambricon or intel; a CPU-only node has no devices)"));
  }
  d.vendor = *parsed_vendor;
  for (auto [key, out] : {std::pair{"id", &d.id},
                          {"model", &d.model},
                          {"uuid", &d.uuid},
                          {"pci_bus_id", &d.pci_bus_id},
                          {"health_message", &d.health_message},
                          {"architecture", &d.architecture},
                          {"driver_version", &d.driver_version},
                          {"local_cpus", &d.local_cpus}}) {
    if (auto s = r.String(key, out); !s.ok()) return s;
  }
  if (auto s = r.Integer("index", &d.index, 0); !s.ok()) return s;
  if (auto s = r.Integer("numa_node", &d.numa_node, -1); !s.ok()) return s;
  if (auto s = r.Integer("memory_mib", &d.memory_mib, 1, true); !s.ok()) return s;
  if (auto s = r.Integer("memory_used_mib", &d.memory_used_mib, 0); !s.ok()) return s;
  if (auto s = r.Bool("healthy", &d.healthy); !s.ok()) return s;
  if (d.model.empty()) return absl::InvalidArgumentError(absl::StrCat(r.Path("model"), ": required"));
  if (auto it = j.find("device_nodes"); it != j.end()) {
    for (size_t i = 0; it->is_array() && i < it->size(); ++i) {
      const json& node = (*it)[i];
      if (!node.is_string() || node.get<std::string>().empty() || node.get<std::string>()[0] != '/') {
        return absl::InvalidArgumentError(absl::StrCat(r.Path("device_nodes"), "[", i, "]: must be an absolute path"));
      }
      d.device_nodes.push_back(node.get<std::string>());
    }
    if (!it->is_array()) return absl::InvalidArgumentError(absl::StrCat(r.Path("device_nodes"), ": must be an array"));
  }
  if (auto it = j.find("links"); it != j.end()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(r.Path("links"), ": must be an array"));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      auto link = ParseLink((*it)[i], absl::StrCat(r.Path("links"), "[", i, "]"));
      if (!link.ok()) return link.status();
      d.links.push_back(*std::move(link));
    }
  }
  return d;
}

}  // namespace

absl::string_view LinkKindName(LinkKind kind) {
  for (const auto& [k, name] : kLinkNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

absl::StatusOr<LinkKind> ParseLinkKind(absl::string_view name) {
  for (const auto& [kind, n] : kLinkNames) {
    if (n == name) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown link kind '", name,
                   "' (nvlink, metaxlink, mlulink, xelink, pcie_switch, pcie_host_bridge, same_numa, "
                   "cross_socket)"));
}

absl::StatusOr<NodeInventory> ParseInventoryJson(absl::string_view text) {
  json root = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("inventory: not valid JSON");
  if (!root.is_object()) return absl::InvalidArgumentError("inventory: must be a JSON object");
  FieldReader r(root, "inventory");
  // "backend" and "simulated" are accepted so --print-inventory output can be fed back in.
  if (auto s = r.CheckKnownKeys(
          {"hostname", "cpus", "memory_mib", "devices", "backend", "simulated", "torch_devices", "collectives"});
      !s.ok()) {
    return s;
  }
  NodeInventory inv;
  if (auto s = r.String("backend", &inv.backend); !s.ok()) return s;
  if (auto s = r.Bool("simulated", &inv.simulated); !s.ok()) return s;
  if (auto s = r.String("hostname", &inv.hostname); !s.ok()) return s;
  if (auto s = r.Integer("cpus", &inv.cpus, 0); !s.ok()) return s;
  if (auto s = r.Integer("memory_mib", &inv.memory_mib, 0); !s.ok()) return s;
  // A simulated node may pose with a cross-vendor collective installed (docs/mixed-vendor.md).
  if (auto collectives = root.find("collectives"); collectives != root.end()) {
    if (!collectives->is_array()) return absl::InvalidArgumentError("inventory.collectives: must be an array");
    for (const auto& c : *collectives) {
      if (!c.is_string() || c.get<std::string>() != "flagcx") {
        return absl::InvalidArgumentError("inventory.collectives: each entry must be \"flagcx\"");
      }
      inv.collectives.insert(c.get<std::string>());
    }
  }
  auto devices = root.find("devices");
  if (devices != root.end()) {
    if (!devices->is_array()) return absl::InvalidArgumentError("inventory.devices: must be an array");
    std::map<Vendor, int> next_index;
    for (size_t i = 0; i < devices->size(); ++i) {
      auto d = ParseDevice((*devices)[i], absl::StrCat("inventory.devices[", i, "]"));
      if (!d.ok()) return d.status();
      if (d->index < 0) d->index = next_index[d->vendor];
      next_index[d->vendor] = d->index + 1;
      if (d->id.empty()) d->id = absl::StrCat(VendorName(d->vendor), d->index);
      inv.devices.push_back(*std::move(d));
    }
  }
  // Ids must be unique and links must point at devices of this node.
  std::set<std::string> ids;
  for (const auto& d : inv.devices) {
    if (!ids.insert(d.id).second) {
      return absl::InvalidArgumentError(absl::StrCat("inventory.devices: duplicate id '", d.id, "'"));
    }
  }
  for (const auto& d : inv.devices) {
    for (const auto& l : d.links) {
      if (!ids.contains(l.peer_device_id) || l.peer_device_id == d.id) {
        return absl::InvalidArgumentError(absl::StrCat("inventory.devices[", d.id, "].links: peer '", l.peer_device_id,
                                                       "' is not another device of this node"));
      }
    }
  }
  return inv;
}

nlohmann::json CapabilityToJson(const Capability& cap) {
  json precisions = json::array();
  for (Precision p : cap.precisions) precisions.push_back(PrecisionName(p));
  json peaks = json::object();
  for (const auto& [p, v] : cap.peak_tflops) peaks[std::string(PrecisionName(p))] = v;
  return {{"isa", IsaFamilyName(cap.isa)},          {"arch_major", cap.arch_major},
          {"arch_minor", cap.arch_minor},           {"precisions", precisions},
          {"bandwidth_gbps", cap.bandwidth_gbps},   {"peak_tflops", peaks},
          {"runtime_version", cap.runtime_version}, {"collective", cap.collective},
          {"spec_source", cap.spec_source},         {"torch_device", cap.torch_device},
          {"dist_backend", cap.dist_backend}};
}

nlohmann::json InventoryToJson(const NodeInventory& inv) {
  json devices = json::array();
  for (const auto& d : inv.devices) {
    json links = json::array();
    for (const auto& l : d.links) {
      links.push_back({{"peer", l.peer_device_id}, {"kind", LinkKindName(l.kind)}, {"count", l.count}});
    }
    devices.push_back({{"id", d.id},
                       {"index", d.index},
                       {"vendor", VendorName(d.vendor)},
                       {"model", d.model},
                       {"uuid", d.uuid},
                       {"pci_bus_id", d.pci_bus_id},
                       {"numa_node", d.numa_node},
                       {"memory_mib", d.memory_mib},
                       {"memory_used_mib", d.memory_used_mib},
                       {"healthy", d.healthy},
                       {"health_message", d.health_message},
                       {"architecture", d.architecture},
                       {"driver_version", d.driver_version},
                       {"serial", d.serial},
                       {"local_cpus", d.local_cpus},
                       {"device_nodes", d.device_nodes},
                       {"utilization_percent", d.utilization_percent},
                       {"links", links},
                       {"fingerprint", d.fingerprint},
                       {"capability", CapabilityToJson(d.capability)}});
  }
  return {{"hostname", inv.hostname},       {"cpus", inv.cpus},           {"memory_mib", inv.memory_mib},
          {"backend", inv.backend},         {"simulated", inv.simulated}, {"torch_devices", inv.torch_devices},
          {"collectives", inv.collectives}, {"devices", devices}};
}

}  // namespace hetpool::drivers
