// A job across vendors placed as one gang: its role groups each on their own nodes with their own
// requirements, all of them or none (docs/mixed-vendor.md). Built on a policy's single-group
// placement, so each group gets the same filters, scores and topology choice as any job.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/placement_policy.h"

namespace hetpool::scheduler {

using PlaceOneGroup = std::function<absl::StatusOr<Placement>(const PlacementRequest&, const std::vector<NodeView>&)>;

// request.groups: the most constrained group first (fewest nodes that could ever hold it), each on
// the views the groups before it left (their nodes out of reach), so a group that only one node
// can hold is not crowded out by one that could go anywhere. The placement lists the nodes group
// by group in the request's order (node ranks follow), each NodeAssignment with its group and
// vendor.
//
// request.mixed_vendors: one vendor when one can hold the whole job (no link between collective
// domains to pay); else the vendors fastest first (their cards' peak in the job's precision), each
// taking as many of the remaining nodes as it can, one group per vendor named after it.
//
// UNAVAILABLE when the pool could hold it but not now; FAILED_PRECONDITION when it never could
// (each group on its own already, or too few capable nodes of all vendors together).
absl::StatusOr<Placement> PlaceRoleGroups(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                          const PlaceOneGroup& place);

// The single-group request for one role group (the job's host resources and quota, the group's
// shape and requirements).
PlacementRequest GroupRequest(const PlacementRequest& job, const RoleGroup& group);

}  // namespace hetpool::scheduler
