// QueueSort FairShare: higher `priority` first; among equals, the job whose group has the lowest
// fair share (its dominant share of what it is entitled to, src/daemon/sharing/fair_share.h);
// then submission order. Without fair-share queues every share is 0 and this is PrioritySort.
// The scheduling cycle reads the shares again after each placement, so one pass alternates
// between groups instead of serving whoever submitted first.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class FairShareSort final : public QueueSortPlugin {
 public:
  absl::string_view Name() const override { return "FairShare"; }
  bool Less(const QueuedJob& a, const QueuedJob& b) const override {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.share != b.share) return a.share < b.share;
    return a.submit_seq < b.submit_seq;
  }
};

}  // namespace

std::shared_ptr<Plugin> NewFairShareSort() { return std::make_shared<FairShareSort>(); }

}  // namespace hetpool::scheduler::plugins
