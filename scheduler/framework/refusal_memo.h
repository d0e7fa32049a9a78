// Refusals remembered across calls. When the pool is full, most decisions are jobs that were
// refused before and are offered again (every scheduling cycle, for every waiting job); looking
// at every node again would give the same answer, since what refuses a job (pre-filters,
// filters, gang assembly, permits) depends only on the request and the views (plugin.h). So a
// request refused on views whose generations have not changed since gets the same status, with
// the same pending reason, without a look at the nodes. Views with generation 0 (unknown) are
// never remembered.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/placement_policy.h"

namespace hetpool::scheduler {

class RefusalMemo {
 public:
  // A key of the views' generations, in order; 0 when a view has none.
  static uint64_t ViewsKey(const std::vector<NodeView>& nodes);
  // The same key from the generations alone (FreeCapacityIndex keeps them in one array).
  static uint64_t ViewsKey(std::span<const uint64_t> generations);
  // Every field of the request that placement reads.
  static std::string RequestKey(const PlacementRequest& request);
  // The refusal of the request of `request_key` on views of `views_key`, if one is remembered.
  std::optional<absl::Status> Find(const std::string& request_key, uint64_t views_key) const;
  void Remember(const std::string& request_key, uint64_t views_key, absl::Status refusal);
  // Whether a refusal of the request is remembered at all, on any views (no views key needed).
  bool Knows(const std::string& request_key) const { return refusals_.contains(request_key); }
  size_t size() const { return refusals_.size(); }

 private:
  static constexpr size_t kMaxRemembered = 4096;  // distinct request shapes; then start over
  std::unordered_map<std::string, std::pair<uint64_t, absl::Status>> refusals_;
};

}  // namespace hetpool::scheduler
