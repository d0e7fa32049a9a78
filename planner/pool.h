// The pool as the planner sees it: one entry per fingerprint class (identical cards), with each
// node's count of those cards, how many are free, and its largest link group (cards joined by a
// vendor fabric: NVLink/NVSwitch, MetaXLink, MLU-Link, Xe Link), which bounds tensor parallelism.
// And the operator's price table: currency per card-hour, utilisation and reserve per class.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hetpool/device.h"

namespace hetpool::planner {

struct NodeCapacity {
  std::string node;
  int devices = 0;             // healthy cards of the class on the node
  int free = 0;                // of those, not held by a job on a schedulable node
  int largest_link_group = 1;  // most cards of the class joined by one fabric
  // What one card sends to a fabric peer, GB/s one way (the best-connected peer: a ring uses one
  // neighbour); 0 = no fabric, the cards talk over PCIe.
  double fabric_gbytes_per_s = 0;
};

struct PoolClass {
  std::string fingerprint;
  std::string label;
  DeviceRecord example;  // one card: model, memory, capability
  std::vector<NodeCapacity> nodes;

  int Total() const;
  int Free() const;
  int MaxPerNode() const;
  int LargestLinkGroup() const;
  double FabricBandwidth() const;  // the best node's fabric_gbytes_per_s
};

// Adds one node's healthy cards to their classes. `free_ids` names the cards nobody holds; pass
// std::nullopt to count every healthy card free (offline planning against inventory files).
void AddNode(std::vector<PoolClass>& classes, const std::string& node, const NodeInventory& inventory,
             const std::optional<std::set<std::string>>& free_ids);

// One row of the operator's table, matched to a class by fingerprint id or by a case-insensitive
// substring of its label ("H100", "MLU370").
struct ClassPricing {
  std::string match;
  double price_per_card_hour = 0;               // 0 = not priced
  std::optional<double> mfu;                    // model-FLOPs utilisation its training reaches (compute_time.h)
  std::optional<double> bandwidth_utilisation;  // share of peak memory bandwidth decode reaches
  std::optional<double> reserve_gib;            // runtime memory (context, collectives) per card
  std::optional<double> network_gbytes_per_s;   // what each card sends across nodes, GB/s one way
  std::optional<double> pcie_gbytes_per_s;      // what a card sends to a peer over PCIe, GB/s one way
};

// True when `match` is the class's fingerprint id or a case-insensitive substring of its label
// or card model.
bool MatchesClass(absl::string_view match, const PoolClass& cls);

struct PriceTable {
  std::string currency = "USD";
  std::string baseline;  // class for cost-performance (match text); empty = best-ranked priced class
  std::vector<ClassPricing> classes;
  double memory_margin = 0.10;  // allocator slack on top of the estimate

  // The first row matching the class, or nullptr.
  const ClassPricing* Find(const PoolClass& cls) const;
};

// {"currency": "CNY", "baseline": "A100", "memory_margin": 0.1,
//  "classes": [{"match": "H100", "price_per_card_hour": 18.5, "mfu": 0.45,
//               "bandwidth_utilisation": 0.6, "reserve_gib": 1.5, "network_gbytes_per_s": 50,
//               "pcie_gbytes_per_s": 16}, ...]}
absl::StatusOr<PriceTable> ParsePriceTable(absl::string_view json_text);

// A card's modelled compute for a job that names no model: its dense peak in `precision` x the
// flat MFU its class reaches (the table's row for its class, else the vendor default), what the
// daemon splits a job's batch across classes by. The planner, which knows the model, times
// steps with compute_time.h. nullopt when the card has no peak figure for the precision.
std::optional<double> ModelledTflops(const DeviceRecord& card, Precision precision, const PriceTable& prices);

// Defaults when the table says nothing, by vendor (docs/planner.md says where they come from).
double DefaultMfu(Vendor vendor);
double DefaultBandwidthUtilisation();
double DefaultReserveGib(Vendor vendor);
// Bytes in a GiB, the unit of the price table's reserves.
inline constexpr double kGiB = 1024.0 * 1024 * 1024;
double DefaultNetworkGBps();
double DefaultPcieGBps();
// GB/s one way of one lane of a vendor fabric.
double FabricLaneGBps(LinkKind kind);

}  // namespace hetpool::planner
