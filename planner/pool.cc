#include "planner/pool.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "drivers/fingerprint/card_speed.h"
#include "drivers/fingerprint/fingerprint.h"
#include "nlohmann/json.hpp"

namespace hetpool::planner {
namespace {

bool IsFabric(LinkKind kind) {
  return kind == LinkKind::kNvLink || kind == LinkKind::kMetaxLink || kind == LinkKind::kMluLink ||
         kind == LinkKind::kXeLink;
}

// Connected components of the fabric graph restricted to `members`; returns the largest size.
int LargestGroup(const std::vector<const DeviceRecord*>& members) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < members.size(); ++i) index[members[i]->id] = static_cast<int>(i);
  std::vector<int> parent(members.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
  std::function<int(int)> root = [&](int x) { return parent[x] == x ? x : parent[x] = root(parent[x]); };
  for (size_t i = 0; i < members.size(); ++i) {
    for (const Link& link : members[i]->links) {
      auto it = index.find(link.peer_device_id);
      if (it != index.end() && IsFabric(link.kind)) parent[root(static_cast<int>(i))] = root(it->second);
    }
  }
  std::map<int, int> sizes;
  int best = members.empty() ? 0 : 1;
  for (size_t i = 0; i < members.size(); ++i) best = std::max(best, ++sizes[root(static_cast<int>(i))]);
  return best;
}

// The best fabric peer of any member, in GB/s one way.
double FabricBandwidthOf(const std::vector<const DeviceRecord*>& members) {
  double best = 0;
  for (const DeviceRecord* d : members) {
    for (const Link& link : d->links) {
      if (IsFabric(link.kind)) best = std::max(best, link.count * FabricLaneGBps(link.kind));
    }
  }
  return best;
}

absl::StatusOr<std::optional<double>> OptionalNumber(const nlohmann::json& row, const char* key, double lo, double hi) {
  auto it = row.find(key);
  if (it == row.end()) return std::optional<double>();
  if (!it->is_number() || it->get<double>() < lo || it->get<double>() > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("price table: \"", key, "\" must be a number in [", lo, ", ", hi, "]"));
  }
  return std::optional<double>(it->get<double>());
}

}  // namespace

int PoolClass::Total() const {
  int n = 0;
  for (const auto& node : nodes) n += node.devices;
  return n;
}
int PoolClass::Free() const {
  int n = 0;
  for (const auto& node : nodes) n += node.free;
  return n;
}
int PoolClass::MaxPerNode() const {
  int n = 0;
  for (const auto& node : nodes) n = std::max(n, node.devices);
  return n;
}
double PoolClass::FabricBandwidth() const {
  double best = 0;
  for (const auto& node : nodes) best = std::max(best, node.fabric_gbytes_per_s);
  return best;
}
int PoolClass::LargestLinkGroup() const {
  int n = 0;
  for (const auto& node : nodes) n = std::max(n, node.largest_link_group);
  return n;
}

void AddNode(std::vector<PoolClass>& classes, const std::string& node, const NodeInventory& inventory,
             const std::optional<std::set<std::string>>& free_ids) {
  std::map<std::string, std::vector<const DeviceRecord*>> by_class;
  for (const DeviceRecord& d : inventory.devices) {
    if (d.healthy && !d.fingerprint.empty()) by_class[d.fingerprint].push_back(&d);
  }
  for (const auto& [fingerprint, members] : by_class) {
    auto it = std::find_if(classes.begin(), classes.end(),
                           [&fp = fingerprint](const PoolClass& c) { return c.fingerprint == fp; });
    if (it == classes.end()) {
      PoolClass cls;
      cls.fingerprint = fingerprint;
      cls.label = drivers::FingerprintLabel(*members.front());
      cls.example = *members.front();
      cls.example.links.clear();
      classes.push_back(std::move(cls));
      it = std::prev(classes.end());
    }
    NodeCapacity cap;
    cap.node = node;
    cap.devices = static_cast<int>(members.size());
    cap.free = free_ids
                   ? static_cast<int>(std::count_if(members.begin(), members.end(),
                                                    [&](const DeviceRecord* d) { return free_ids->contains(d->id); }))
                   : cap.devices;
    cap.largest_link_group = LargestGroup(members);
    cap.fabric_gbytes_per_s = FabricBandwidthOf(members);
    it->nodes.push_back(std::move(cap));
  }
}

bool MatchesClass(absl::string_view match, const PoolClass& cls) {
  if (match.empty()) return false;
  const std::string needle = absl::AsciiStrToLower(match);
  return match == cls.fingerprint || absl::StrContains(absl::AsciiStrToLower(cls.label), needle) ||
         absl::StrContains(absl::AsciiStrToLower(cls.example.model), needle);
}

const ClassPricing* PriceTable::Find(const PoolClass& cls) const {
  for (const ClassPricing& row : classes) {
    if (MatchesClass(row.match, cls)) return &row;
  }
  return nullptr;
}

absl::StatusOr<PriceTable> ParsePriceTable(absl::string_view json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("price table is not a JSON object");
  PriceTable table;
  if (j.contains("currency")) {
    if (!j["currency"].is_string()) return absl::InvalidArgumentError("price table: \"currency\" must be a string");
    table.currency = j["currency"].get<std::string>();
  }
  if (j.contains("baseline")) {
    if (!j["baseline"].is_string()) return absl::InvalidArgumentError("price table: \"baseline\" must be a string");
    table.baseline = j["baseline"].get<std::string>();
  }
  auto margin = OptionalNumber(j, "memory_margin", 0, 1);
  if (!margin.ok()) return margin.status();
  if (*margin) table.memory_margin = **margin;
  if (j.contains("classes")) {
    if (!j["classes"].is_array()) return absl::InvalidArgumentError("price table: \"classes\" must be an array");
    for (const auto& row : j["classes"]) {
      if (!row.is_object() || !row.contains("match") || !row["match"].is_string() ||
          row["match"].get<std::string>().empty()) {
        return absl::InvalidArgumentError("price table: every class needs a non-empty \"match\" string");
      }
      ClassPricing p;
      p.match = row["match"].get<std::string>();
      auto price = OptionalNumber(row, "price_per_card_hour", 0, 1e6);
      auto mfu = OptionalNumber(row, "mfu", 0.01, 1);
      auto bw = OptionalNumber(row, "bandwidth_utilisation", 0.01, 1);
      auto reserve = OptionalNumber(row, "reserve_gib", 0, 1024);
      auto network = OptionalNumber(row, "network_gbytes_per_s", 0.01, 1e5);
      auto pcie = OptionalNumber(row, "pcie_gbytes_per_s", 0.01, 1e5);
      for (const auto* s : {&price, &mfu, &bw, &reserve, &network, &pcie}) {
        if (!s->ok())
          return absl::InvalidArgumentError(absl::StrCat(s->status().message(), " (class '", p.match, "')"));
      }
      p.price_per_card_hour = price->value_or(0);
      p.mfu = *mfu;
      p.bandwidth_utilisation = *bw;
      p.reserve_gib = *reserve;
      p.network_gbytes_per_s = *network;
      p.pcie_gbytes_per_s = *pcie;
      table.classes.push_back(std::move(p));
    }
  }
  return table;
}

// Sustained model-FLOPs utilisation of large-model training: ~40% is what well-tuned Megatron
// runs report on NVIDIA cards; the other stacks are younger, so we assume less until measured.
std::optional<double> ModelledTflops(const DeviceRecord& card, Precision precision, const PriceTable& prices) {
  const std::optional<double> peak = drivers::PeakTflops(card, precision);
  if (!peak) return std::nullopt;
  PoolClass cls;
  cls.fingerprint = card.fingerprint;
  cls.label = drivers::FingerprintLabel(card);
  cls.example = card;
  const ClassPricing* row = prices.Find(cls);
  return *peak * (row && row->mfu ? *row->mfu : DefaultMfu(card.vendor));
}

double DefaultMfu(Vendor vendor) {
  switch (vendor) {
    // The flat form, for an NVIDIA card with no bandwidth figure and for the batch split; plans
    // of cards with one use the two-term default (compute_time.h). Measured on a real H200
    // (../shared/docs/H200-RUN.md: PyTorch 2.11, bf16 autocast, SDPA), counting model FLOPs as
    // ModelFlopsPerToken does: 0.353 for a 1.1B Llama shape, 0.421 for a 3B one. 0.387 is the one
    // flat figure with the least worst error over both (-8.9% and +8.7% in step time).
    case Vendor::kNvidia: return 0.387;
    case Vendor::kMetax: return 0.35;
    default: return 0.30;
  }
}

double DefaultBandwidthUtilisation() { return 0.6; }

// Runtime context plus collective buffers per card: CUDA/MACA contexts take ~0.5-1 GiB.
double DefaultReserveGib(Vendor vendor) { return vendor == Vendor::kCpu ? 0.0 : 1.0; }

// One 200 Gb/s InfiniBand/RoCE port per card, the ratio of NVIDIA's DGX A100 SuperPOD (and of
// most training clusters since); operators with other fabrics set network_gbytes_per_s.
double DefaultNetworkGBps() { return 25; }

// PCIe 4.0 x16 carries 32 GB/s one way; peer traffic through the host bridge reaches about half
// (nccl-tests bus bandwidth on PCIe-only nodes).
double DefaultPcieGBps() { return 16; }

// NVLink 3 and 4 lanes carry 25 GB/s one way (A100: 12 lanes, 300 GB/s; H100: 18 lanes, 450
// GB/s; NVIDIA's data sheets). MetaXLink, MLU-Link and Xe Link lanes are taken as equal until
// their vendors publish per-lane figures (docs/planner.md, "Communication").
double FabricLaneGBps(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvLink:
    case LinkKind::kMetaxLink:
    case LinkKind::kMluLink:
    case LinkKind::kXeLink: return 25;
    default: return 0;
  }
}

}  // namespace hetpool::planner
