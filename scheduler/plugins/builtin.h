// The built-in scheduler plugins (scheduler/framework/plugin.h), by extension point:
//   QueueSort  PrioritySort     higher priority first, then submission order
//   PreFilter  RequestShape     refuses shapes no node could have (0 nodes, > 64 devices a node)
//   Filter     Fingerprint      CanRun, allowed vendors/models/classes          (never)
//              NodeSchedulable  node Ready and not drained                      (waiting)
//              HostResources    host CPU and memory free on the node            (waiting; never
//                               when the node has less in all)
//              DeviceHealth     the vendor library reports the card healthy     (waiting)
//              Capacity         whole card free, or enough milli + memory left  (waiting; never
//                               when a share asks more memory than the card has)
//   Score      BestFit          fewest devices (or least share) left on the node
//              Spread           the opposite: most left
//              LinkScore        best-connected device set (link_score.h)
//              Fgd              least expected fragmentation growth against the recent mix of
//                               placed shapes (fragmentation.h); also a Reserve plugin
//   Permit     Gang             all nnodes present, each with its devices: all or nothing
// Each lives in its own file (request_shape.cc, ..., gang.cc; factories.h lists them); this
// header and builtin.cc map the names a profile uses onto them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "scheduler/framework/plugin.h"

namespace hetpool::scheduler {

// Builds a built-in plugin from its profile arguments (unknown names and arguments are errors).
absl::StatusOr<std::shared_ptr<Plugin>> MakeBuiltinPlugin(const std::string& name, const nlohmann::json& args);
std::vector<std::string> BuiltinPluginNames();

}  // namespace hetpool::scheduler
