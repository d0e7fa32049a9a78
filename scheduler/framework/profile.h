// The scheduler profile: which plugins run at each extension point, in order, with score weights
// and arguments. JSON, checked when hetpoold starts (--scheduler-profile); any mistake is an error
// naming the point and plugin. The filters that keep placements correct (Fingerprint,
// NodeSchedulable, HostResources, DeviceHealth, Capacity) and the Gang permit cannot be left out.
// queueSort takes one plugin; without one, jobs go by priority, then submission order.
//
//   {"queueSort": ["PrioritySort"], "preFilter": ["RequestShape"],
//    "filter": ["Fingerprint", "NodeSchedulable", "HostResources", "DeviceHealth", "Capacity", "Quota", "Reservation"],
//    "score": [{"name": "Fgd", "weight": 100, "args": {"mix": "submitted", "window": 500}}, {"name": "LinkScore",
//    "weight": 10},
//              {"name": "TieRank", "weight": 1}],
//    "permit": ["Gang"], "nodesToScore": 64}
//
// Score plugins that also keep state per placement (Fgd) are Reserve plugins too, automatically.
// The baselines the trace replay compares against (the FGD paper's FGD, BestFit, packing and
// random) are profiles too, in scheduler/profiles/.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/framework/framework.h"

namespace hetpool::scheduler {

absl::StatusOr<std::unique_ptr<Framework>> FrameworkFromProfile(absl::string_view json_text);

// The profile hetpoold runs without --scheduler-profile (deploy/scheduler-profile.json is a copy).
absl::string_view DefaultProfileJson();
std::unique_ptr<Framework> DefaultFramework();

}  // namespace hetpool::scheduler
