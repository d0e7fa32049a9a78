#include "src/common/convert.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "drivers/fingerprint/spec_table.h"
#include "src/common/names.h"

namespace hetpool {

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kFatal: return "fatal";
    case Severity::kDegraded: return "degraded";
    case Severity::kNoted: return "noted";
  }
  return "noted";
}

Severity ParseSeverity(const std::string& name) {
  if (name == "fatal") return Severity::kFatal;
  if (name == "degraded") return Severity::kDegraded;
  return Severity::kNoted;
}

namespace {

pb::LinkKind LinkKindToProto(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvLink: return pb::LINK_KIND_NVLINK;
    case LinkKind::kMetaxLink: return pb::LINK_KIND_METAXLINK;
    case LinkKind::kMluLink: return pb::LINK_KIND_MLULINK;
    case LinkKind::kXeLink: return pb::LINK_KIND_XELINK;
    case LinkKind::kPcieSwitch: return pb::LINK_KIND_PCIE_SWITCH;
    case LinkKind::kPcieHostBridge: return pb::LINK_KIND_PCIE_HOST_BRIDGE;
    case LinkKind::kSameNuma: return pb::LINK_KIND_SAME_NUMA;
    case LinkKind::kCrossSocket: return pb::LINK_KIND_CROSS_SOCKET;
  }
  return pb::LINK_KIND_UNSPECIFIED;
}

absl::StatusOr<LinkKind> LinkKindFromProto(pb::LinkKind kind) {
  switch (kind) {
    case pb::LINK_KIND_NVLINK: return LinkKind::kNvLink;
    case pb::LINK_KIND_METAXLINK: return LinkKind::kMetaxLink;
    case pb::LINK_KIND_MLULINK: return LinkKind::kMluLink;
    case pb::LINK_KIND_XELINK: return LinkKind::kXeLink;
    case pb::LINK_KIND_PCIE_SWITCH: return LinkKind::kPcieSwitch;
    case pb::LINK_KIND_PCIE_HOST_BRIDGE: return LinkKind::kPcieHostBridge;
    case pb::LINK_KIND_SAME_NUMA: return LinkKind::kSameNuma;
    case pb::LINK_KIND_CROSS_SOCKET: return LinkKind::kCrossSocket;
    default: return absl::InvalidArgumentError(absl::StrCat("unknown link kind ", kind));
  }
}

constexpr std::pair<pb::JobState, absl::string_view> kStateNames[] = {
    {pb::JOB_STATE_PENDING, "PENDING"}, {pb::JOB_STATE_SCHEDULED, "SCHEDULED"},
    {pb::JOB_STATE_RUNNING, "RUNNING"}, {pb::JOB_STATE_SUCCEEDED, "SUCCEEDED"},
    {pb::JOB_STATE_FAILED, "FAILED"},   {pb::JOB_STATE_CANCELLED, "CANCELLED"},
};

IsaFamily ParseIsa(const std::string& name) {
  for (IsaFamily isa : {IsaFamily::kCudaSass, IsaFamily::kMaca, IsaFamily::kBang, IsaFamily::kSpirv}) {
    if (drivers::IsaFamilyName(isa) == name) return isa;
  }
  return IsaFamily::kNone;
}

pb::Capability CapabilityToProto(const Capability& cap) {
  pb::Capability out;
  out.set_isa(std::string(drivers::IsaFamilyName(cap.isa)));
  out.set_arch_major(cap.arch_major);
  out.set_arch_minor(cap.arch_minor);
  for (Precision p : cap.precisions) out.add_precisions(std::string(drivers::PrecisionName(p)));
  out.set_bandwidth_gbps(cap.bandwidth_gbps);
  for (const auto& [p, v] : cap.peak_tflops) (*out.mutable_peak_tflops())[std::string(drivers::PrecisionName(p))] = v;
  out.set_runtime_version(cap.runtime_version);
  out.set_collective(cap.collective);
  out.set_spec_source(cap.spec_source);
  out.set_torch_device(cap.torch_device);
  out.set_dist_backend(cap.dist_backend);
  return out;
}

absl::StatusOr<Capability> CapabilityFromProto(const pb::Capability& in) {
  Capability cap;
  cap.isa = ParseIsa(in.isa());
  cap.arch_major = in.arch_major();
  cap.arch_minor = in.arch_minor();
  for (const auto& name : in.precisions()) {
    auto p = drivers::ParsePrecision(name);
    if (!p.ok()) return p.status();
    cap.precisions.insert(*p);
  }
  cap.bandwidth_gbps = in.bandwidth_gbps();
  for (const auto& [name, v] : in.peak_tflops()) {
    auto p = drivers::ParsePrecision(name);
    if (!p.ok()) return p.status();
    cap.peak_tflops[*p] = v;
  }
  cap.runtime_version = in.runtime_version();
  cap.collective = in.collective();
  cap.spec_source = in.spec_source();
  cap.torch_device = in.torch_device();
  cap.dist_backend = in.dist_backend();
  return cap;
}

}  // namespace

pb::Device ToProto(const DeviceRecord& d) {
  pb::Device out;
  out.set_id(d.id);
  out.set_index(d.index);
  out.set_vendor(std::string(VendorName(d.vendor)));
  out.set_model(d.model);
  out.set_uuid(d.uuid);
  out.set_pci_bus_id(d.pci_bus_id);
  out.set_numa_node(d.numa_node);
  out.set_memory_mib(d.memory_mib);
  out.set_memory_used_mib(d.memory_used_mib);
  out.set_healthy(d.healthy);
  out.set_health_message(d.health_message);
  out.set_architecture(d.architecture);
  out.set_driver_version(d.driver_version);
  out.set_serial(d.serial);
  out.set_local_cpus(d.local_cpus);
  for (const auto& node : d.device_nodes) out.add_device_nodes(node);
  for (const auto& p : d.processes) {
    auto* process = out.add_processes();
    process->set_pid(p.pid);
    process->set_memory_mib(p.memory_mib);
    process->set_owner(p.owner);
  }
  out.set_dirty(d.dirty);
  for (const HealthSignal& s : d.signals) {
    auto* signal = out.add_signals();
    signal->set_severity(SeverityName(s.severity));
    signal->set_what(s.what);
    signal->set_source(s.source);
  }
  out.set_utilization_percent(d.utilization_percent);
  out.set_fingerprint(d.fingerprint);
  *out.mutable_capability() = CapabilityToProto(d.capability);
  for (const auto& l : d.links) {
    auto* link = out.add_links();
    link->set_peer_device_id(l.peer_device_id);
    link->set_kind(LinkKindToProto(l.kind));
    link->set_count(l.count);
  }
  return out;
}

pb::NodeInventory ToProto(const NodeInventory& inv) {
  pb::NodeInventory out;
  out.set_hostname(inv.hostname);
  out.set_cpus(inv.cpus);
  out.set_memory_mib(inv.memory_mib);
  out.set_backend(inv.backend);
  out.set_simulated(inv.simulated);
  for (const auto& t : inv.torch_devices) out.add_torch_devices(t);
  for (const auto& c : inv.collectives) out.add_collectives(c);
  if (!inv.container_runtime.empty()) {
    out.mutable_container_runtime()->set_name(inv.container_runtime);
    out.mutable_container_runtime()->set_version(inv.container_runtime_version);
  }
  for (const auto& image : inv.images) out.add_images(image);
  for (const auto& d : inv.devices) *out.add_devices() = ToProto(d);
  return out;
}

absl::StatusOr<NodeInventory> FromProto(const pb::NodeInventory& in) {
  NodeInventory inv;
  inv.hostname = in.hostname();
  inv.cpus = in.cpus();
  inv.memory_mib = in.memory_mib();
  inv.backend = in.backend();
  inv.simulated = in.simulated();
  for (const auto& t : in.torch_devices()) {
    if (t.empty() || t.size() > 16) return absl::InvalidArgumentError("inventory.torch_devices: bad entry");
    inv.torch_devices.insert(t);
  }
  // Names this daemon does not know are kept (a newer agent may report more); only flagcx is used.
  if (in.collectives_size() > 16) return absl::InvalidArgumentError("inventory.collectives: more than 16 entries");
  for (const auto& c : in.collectives()) {
    const bool plain = !c.empty() && c.size() <= 32 && std::all_of(c.begin(), c.end(), [](char ch) {
      return absl::ascii_islower(ch) || absl::ascii_isdigit(ch) || ch == '_' || ch == '-';
    });
    if (!plain) return absl::InvalidArgumentError("inventory.collectives: each a name of 1-32 of a-z 0-9 _ -");
    inv.collectives.insert(c);
  }
  if (auto s = CheckName("inventory.container_runtime.name", in.container_runtime().name(), 32, false); !s.ok())
    return s;
  if (in.container_runtime().version().size() > 64) {
    return absl::InvalidArgumentError("inventory.container_runtime.version: longer than 64 characters");
  }
  inv.container_runtime = in.container_runtime().name();
  inv.container_runtime_version = in.container_runtime().version();
  if (in.images_size() > 4096) return absl::InvalidArgumentError("inventory.images: more than 4096 entries");
  if (in.images_size() > 0 && inv.container_runtime.empty()) {
    return absl::InvalidArgumentError("inventory.images: listed without a container_runtime");
  }
  for (const auto& image : in.images()) {
    if (auto s = CheckImageReference("inventory.images", image); !s.ok()) return s;
    inv.images.insert(image);
  }
  if (in.devices_size() > 1024) return absl::InvalidArgumentError("inventory.devices: more than 1024 devices");
  std::set<std::string> ids;
  for (int i = 0; i < in.devices_size(); ++i) {
    const pb::Device& d = in.devices(i);
    const std::string where = absl::StrCat("inventory.devices[", i, "]");
    auto vendor = ParseVendor(d.vendor());
    if (!vendor || *vendor == Vendor::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".vendor: unknown device vendor '", d.vendor(), "'"));
    }
    if (d.id().empty() || d.id().size() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".id: must be 1-64 characters"));
    }
    if (d.index() < 0) return absl::InvalidArgumentError(absl::StrCat(where, ".index: negative"));
    if (!ids.insert(d.id()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".id: duplicate '", d.id(), "'"));
    }
    DeviceRecord r;
    r.id = d.id();
    r.index = d.index();
    r.vendor = *vendor;
    r.model = d.model();
    r.uuid = d.uuid();
    r.pci_bus_id = d.pci_bus_id();
    r.numa_node = d.numa_node();
    r.memory_mib = d.memory_mib();
    r.memory_used_mib = d.memory_used_mib();
    r.healthy = d.healthy();
    r.health_message = d.health_message();
    r.architecture = d.architecture();
    r.driver_version = d.driver_version();
    r.serial = d.serial();
    r.local_cpus = d.local_cpus();
    r.device_nodes.assign(d.device_nodes().begin(), d.device_nodes().end());
    for (const auto& p : d.processes()) r.processes.push_back({p.pid(), p.memory_mib(), p.owner()});
    r.dirty = d.dirty();
    for (const auto& s : d.signals()) {
      r.signals.push_back({ParseSeverity(s.severity()), s.what(), s.source()});
    }
    r.utilization_percent = d.utilization_percent();
    r.fingerprint = d.fingerprint();
    auto cap = CapabilityFromProto(d.capability());
    if (!cap.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".capability: ", cap.status().message()));
    r.capability = *std::move(cap);
    for (const auto& l : d.links()) {
      auto kind = LinkKindFromProto(l.kind());
      if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".links: ", kind.status().message()));
      r.links.push_back({l.peer_device_id(), *kind, l.count()});
    }
    inv.devices.push_back(std::move(r));
  }
  for (const auto& d : inv.devices) {
    for (const auto& l : d.links) {
      if (!ids.contains(l.peer_device_id) || l.peer_device_id == d.id) {
        return absl::InvalidArgumentError(
            absl::StrCat("inventory: device ", d.id, " links to '", l.peer_device_id, "', not another device"));
      }
    }
  }
  return inv;
}

google::protobuf::Timestamp ToProtoTime(absl::Time t) {
  google::protobuf::Timestamp out;
  const int64_t nanos = absl::ToUnixNanos(t);
  out.set_seconds(nanos / 1000000000);
  out.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return out;
}

absl::Time FromProtoTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::string_view JobStateName(pb::JobState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) return name;
  }
  return "UNSPECIFIED";
}

absl::StatusOr<pb::JobState> ParseJobState(absl::string_view name) {
  std::string upper = absl::AsciiStrToUpper(name);
  // Also the enum's own name, as -o json prints it (JOB_STATE_FAILED).
  if (absl::StartsWith(upper, "JOB_STATE_")) upper.erase(0, 10);
  for (const auto& [s, n] : kStateNames) {
    if (n == upper) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown job state '", name, "' (PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, CANCELLED)"));
}

bool IsTerminal(pb::JobState state) {
  return state == pb::JOB_STATE_SUCCEEDED || state == pb::JOB_STATE_FAILED || state == pb::JOB_STATE_CANCELLED;
}

}  // namespace hetpool
