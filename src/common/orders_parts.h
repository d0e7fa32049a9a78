// A node's orders as parts that each fit in a message. Orders carry the node's whole desired set
// (level-triggered), so one message grows with every job on the node: with many jobs, or one
// with a large environment, it would pass gRPC's message limit, the agent would drop the stream
// and re-register forever, and the node would swallow jobs without running them. Split, each
// part holds whole launches and kills up to a byte budget; the agent reassembles a version and
// acts only on a complete set, so the protocol stays level-triggered.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "hetpool/v1/agent.pb.h"

namespace hetpool {

// About a quarter of gRPC's default 4 MiB receive limit: a single launch is bounded by the job
// spec limit (job_validation.h), so a part holding one launch always fits.
inline constexpr size_t kOrdersPartBytes = 1 << 20;

// The parts of `orders`, in order; every part has the version, all but the last have more=true.
std::vector<hetpool::v1::Orders> SplitOrders(const hetpool::v1::Orders& orders, size_t part_bytes = kOrdersPartBytes);

// Collects parts on the agent's side.
class OrdersAssembler {
 public:
  // The complete set once `part` ends a version; a part of a new version drops an unfinished one.
  std::optional<hetpool::v1::Orders> Add(hetpool::v1::Orders part);

 private:
  std::optional<hetpool::v1::Orders> partial_;
};

}  // namespace hetpool
