// First fit: nodes in name order, devices in index order, one vendor per job. Deterministic, so
// a replay of the same inputs always gives the same placement.
#pragma once

#include "scheduler/placement_policy.h"

namespace hetpool::scheduler {

class FirstFitPolicy : public PlacementPolicy {
 public:
  absl::StatusOr<Placement> Place(const PlacementRequest& request,
                                  const std::vector<NodeView>& nodes) override;
};

}  // namespace hetpool::scheduler
