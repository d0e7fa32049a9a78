// Topology-aware placement: one vendor per job, all or nothing across nodes.
//  - Within a node, the device set with the best link score (fabric link > same PCIe switch >
//    same host bridge > same NUMA node > across sockets); among equals, the set that leaves the
//    remaining free devices best connected (so link groups stay whole for later jobs), then the
//    lowest indices.
//  - Across nodes, best fit: the nodes left with the fewest free qualifying devices, so multi-card
//    jobs find whole nodes free. Node name breaks remaining ties (deterministic).
#pragma once

#include <vector>

#include "scheduler/placement_policy.h"

namespace hetpool::scheduler {

// Average pairwise link score of a device set (0 for a single device): fabric links 100 plus
// their lane count, PCIe switch 40, host bridge 30, same NUMA node 20, across sockets 10.
int LinkScore(const std::vector<const DeviceRecord*>& devices);

// The best `count` devices of `free` by the rules above; empty if there are fewer.
std::vector<const DeviceRecord*> ChooseDevices(const std::vector<const DeviceRecord*>& free, int count);

class TopologyPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PlacementRequest& request, const std::vector<NodeView>& nodes) override;

 private:
  // A share of one device per node: best fit across devices (partly used ones first).
  absl::StatusOr<Placement> PlaceFractional(const PlacementRequest& request, const std::vector<NodeView>& nodes);
};

}  // namespace hetpool::scheduler
