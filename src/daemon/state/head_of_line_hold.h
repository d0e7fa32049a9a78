// The head of the queue's hold: the nodes (and their qualifying devices) the first job that waits
// for capacity is held for, so that backfill never delays it (the Reservation filter keeps other
// jobs off them). Only one such hold per pass: more would let a long queue of big jobs idle the
// whole pool.
#pragma once

#include <vector>

#include "scheduler/placement_policy.h"
#include "src/daemon/state/preemption_stage.h"

namespace hetpool::daemon {

// The nodes closest to holding `request` (the least-free part of its ask, cards, host CPU or
// host memory, the largest; then the most free qualifying cards), never a node whose host could
// not hold it at all, with each node's qualifying devices of its best vendor. Empty if the pool
// lacks request.nnodes such nodes.
HeldCards HeadOfLineHold(const scheduler::PlacementRequest& request, const std::vector<scheduler::NodeView>& views);

}  // namespace hetpool::daemon
