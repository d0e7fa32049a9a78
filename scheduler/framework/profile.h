// The scheduler profile: which plugins run at each extension point, in order, with score weights
// and arguments. JSON, checked when hetpoold starts (--scheduler-profile); any mistake is an error
// naming the point and plugin. The filters that keep placements correct (Fingerprint,
// NodeSchedulable, HostResources, DeviceHealth, Capacity) and the Gang permit cannot be left out.
// queueSort takes one plugin; without one, jobs go by priority, then submission order.
//
//   {"queueSort": ["PrioritySort"], "preFilter": ["RequestShape"],
//    "filter": ["Fingerprint", "NodeSchedulable", "HostResources", "DeviceHealth", "Capacity"],
//    "score": [{"name": "BestFit", "weight": 3}, {"name": "LinkScore", "weight": 1},
//              {"name": "Fgd", "weight": 2, "args": {"window": 500}}],
//    "permit": ["Gang"], "nodesToScore": 64}
//
// Score plugins that also keep state per placement (Fgd) are Reserve plugins too, automatically.
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
