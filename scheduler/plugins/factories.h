// One factory per built-in plugin, each defined in the plugin's own file; builtin.cc maps the
// profile's names onto them. Internal to scheduler/plugins (and its tests).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "scheduler/framework/plugin.h"

namespace hetpool::scheduler::plugins {

std::shared_ptr<Plugin> NewPrioritySort();      // priority_sort.cc
std::shared_ptr<Plugin> NewFairShareSort();     // fair_share_sort.cc
std::shared_ptr<Plugin> NewRequestShape();      // request_shape.cc
std::shared_ptr<Plugin> NewFingerprint();       // fingerprint.cc
std::shared_ptr<Plugin> NewNodeSchedulable();   // node_schedulable.cc
std::shared_ptr<Plugin> NewHostResources();     // host_resources.cc
std::shared_ptr<Plugin> NewDeviceHealth();      // device_health.cc
std::shared_ptr<Plugin> NewCapacity();          // capacity.cc
std::shared_ptr<Plugin> NewQuota();             // quota.cc
std::shared_ptr<Plugin> NewReservation();       // reservation.cc
std::shared_ptr<Plugin> NewContainerRuntime();  // container_runtime.cc
std::shared_ptr<Plugin> NewImageLocality();     // image_locality.cc
// args: {"of": "devices" | "shares"} (default devices).
absl::StatusOr<std::shared_ptr<Plugin>> NewBestFit(const nlohmann::json& args);  // best_fit.cc
std::shared_ptr<Plugin> NewTieRank();                                            // tie_rank.cc
std::shared_ptr<Plugin> NewHealthyCards();                                       // healthy_cards.cc
std::shared_ptr<Plugin> NewPacking();                                            // packing.cc
// args: {"seed": N} (default 1).
absl::StatusOr<std::shared_ptr<Plugin>> NewRandom(const nlohmann::json& args);  // random_score.cc
std::shared_ptr<Plugin> NewSpread();                                            // spread.cc
std::shared_ptr<Plugin> NewLinkScore();                                         // link_score_plugin.cc
std::shared_ptr<Plugin> NewGang();                                              // gang.cc
// args: {"window": 1..100000 (default 500), "mix": "placed" | "expected" (default placed)}.
absl::StatusOr<std::shared_ptr<Plugin>> NewFgd(const nlohmann::json& args);  // fgd.cc

// What a placement leaves on the node: free devices (whole-card jobs), or milli on the device
// best fit would take (shares). BestFit scores it low, Spread high (best_fit.cc).
int64_t LeftAfter(const PlacementRequest& request, const NodeCandidate& candidate);
// The node's healthy devices of `vendor` (kCpu: of every vendor), in milli: all of them, and
// what no job holds (tie_rank.cc).
struct UsableMilli {
  int64_t capacity = 0;
  int64_t left = 0;
};
UsableMilli UsableMilliOf(const NodeView& node, Vendor vendor);

}  // namespace hetpool::scheduler::plugins
