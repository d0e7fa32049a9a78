// QueueSort PrioritySort: higher `priority` first, then submission order (Kubernetes'
// PrioritySort, with submission order for its timestamp).
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class PrioritySort final : public QueueSortPlugin {
 public:
  absl::string_view Name() const override { return "PrioritySort"; }
  bool Less(const QueuedJob& a, const QueuedJob& b) const override { return ByPriorityThenSubmission(a, b); }
};

}  // namespace

std::shared_ptr<Plugin> NewPrioritySort() { return std::make_shared<PrioritySort>(); }

}  // namespace hetpool::scheduler::plugins
