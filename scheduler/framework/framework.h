// The daemon's placement policy: a pipeline of named plugins (plugin.h) built from a JSON
// profile (profile.h). One Place call:
//   PreFilter -> per node: device filters that can never pass (CanRun, vendor, class), node
//   filters, device filters that may pass later (health, free capacity) -> device selection
//   (best-linked set, or best-fit share) -> Score, NormalizeScore, weighted sum -> gang assembly
//   (nnodes candidates of one vendor, one rack preferred) -> Permit.
// Schedule() adds Reserve -> Bind (the daemon's Binder) -> Unreserve on failure.
// A job that cannot be placed gets a PendingReason (pending_reason.h) on the returned status.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"

#include "scheduler/framework/diagnosis.h"
#include "scheduler/framework/free_capacity_index.h"
#include "scheduler/framework/pending_reason.h"
#include "scheduler/framework/plugin.h"
#include "scheduler/framework/refusal_memo.h"

namespace hetpool::scheduler {

struct WeightedScore {
  ScorePlugin* plugin = nullptr;
  int weight = 1;
};

class Framework : public PlacementPolicy {
 public:
  // Plugins in run order; `owned` keeps them alive (one object may serve several points).
  struct Plugins {
    std::vector<std::shared_ptr<Plugin>> owned;
    QueueSortPlugin* queue_sort = nullptr;  // null: the PlacementPolicy default order
    std::vector<PreFilterPlugin*> pre_filter;
    std::vector<DeviceFilterPlugin*> device_filter;
    std::vector<NodeFilterPlugin*> node_filter;
    std::vector<WeightedScore> score;
    std::vector<PermitPlugin*> permit;
    std::vector<ReservePlugin*> reserve;
  };
  // nodes_to_score: how many candidates per vendor, best by the plugins that need no device
  // choice, go on to device selection and the plugins that do (Kubernetes' percentageOfNodesToScore
  // plays the same role): what keeps a decision on 5,000 nodes cheap.
  // nodes_to_find: how many feasible nodes a decision looks for before it stops filtering
  // (Kubernetes' numFeasibleNodesToFind); 0 = adaptive (AdaptiveNodesToFind).
  explicit Framework(Plugins plugins, size_t nodes_to_score = kDefaultNodesToScore, size_t nodes_to_find = 0);
  static constexpr size_t kDefaultNodesToScore = 64;
  // Kubernetes' rule: every node of a pool up to 100 nodes; of n nodes, max(5, 50 - n/125)
  // percent, but at least 100.
  static size_t AdaptiveNodesToFind(size_t nodes);

  absl::StatusOr<Placement> Place(const PlacementRequest& request, const std::vector<NodeView>& nodes) override;
  bool QueueLess(const QueuedJob& a, const QueuedJob& b) const override;
  // Place, then Reserve, Bind and (if binding fails) Unreserve.
  absl::StatusOr<Placement> Schedule(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                     Binder& binder) override;
  // Declares the job mix the pool expects to the plugins that weigh one (WorkloadAwarePlugin).
  void ExpectWorkload(const std::vector<WorkloadShape>& shapes);
  void NoteSubmitted(const PlacementRequest& request) override;
  // Every decision reads every node, as before the free-capacity index: what the tests compare
  // the index's decisions with (they must be the same).
  void ReadEveryNode() {
    absl::MutexLock lock(&mu_);
    index_devices_ = false;
  }

 private:
  // Devices that every device filter must judge alike (plugin.h): same class, health and free
  // state. Devices without a fingerprint are judged alone (scope = node and device id).
  struct DeviceClassKey {
    std::string fingerprint, model, health_message, scope;
    int vendor = 0;
    bool healthy = false, free = false, held = false;
    int32_t milli_free = 0;
    uint64_t memory_mib = 0, memory_free_mib = 0;
    auto Tie() const {
      return std::tie(fingerprint, model, health_message, scope, vendor, healthy, free, held, milli_free, memory_mib,
                      memory_free_mib);
    }
    bool operator<(const DeviceClassKey& o) const { return Tie() < o.Tie(); }
  };
  struct ClassCount {
    uint32_t id = 0;
    uint16_t count = 0;
    uint16_t first = 0;  // index of one of its devices in the node's view
  };
  // What the filters need of one node, kept across calls while the view's generation holds.
  // Inline storage for the usual node (up to 8 cards, a few classes): a decision reads hundreds
  // of summaries, and a pointer to chase per summary was a cache miss each.
  struct NodeSummary {
    uint64_t generation = 0;
    uint32_t context = 0;
    uint8_t busy_vendors = 0;                       // bit per Vendor: some device of it is not free
    bool index_ordered = true;                      // the view lists its devices by ascending DeviceRecord::index
    absl::InlinedVector<uint32_t, 8> device_class;  // per device of the view
    absl::InlinedVector<ClassCount, 4> classes;
    std::vector<int> pair_table;  // link scores of every device pair (link_score.h); empty: not built yet
  };
  // One decision's device-filter outcome for a (node context, device class).
  struct Verdict {
    uint64_t decision = 0;         // valid when equal to decision_
    int never = -1, waiting = -1;  // the first filter that rejected, per kind
    std::string reason;
    // Every filter that made the class wait, with its reason: a busy card over its owner's quota
    // waits on both, and the pending reason names both.
    std::vector<std::pair<int, std::string>> waiting_reasons;
    bool reason_noted = false;
  };

  // A remembered refusal (refusal_memo.h), or PlaceLocked (which reads free_index_ as this
  // brought it up to date with `nodes`).
  absl::StatusOr<Placement> DecideLocked(const PlacementRequest& request, const std::vector<NodeView>& nodes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PreFilter, then the filter pass (filter_pass.h) or the CPU job's walk, scoring and assembly,
  // Permit; a refusal explained by its Diagnosis (diagnosis.h).
  absl::StatusOr<Placement> PlaceLocked(const PlacementRequest& request, const std::vector<NodeView>& nodes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  class DeviceFilterPass;  // filter_pass.h
  // A job on no device: every node the node filters pass, up to `find`.
  absl::StatusOr<Placement> PlaceCpuJob(CycleState& state, const std::vector<NodeView>& nodes, size_t find,
                                        Diagnosis& diagnosis) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first node filter that rejects `node`, and its verdict; nullopt when all pass.
  std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>> NodeVerdict(CycleState& state, const NodeView& node);
  // Scores the candidates (choosing devices for the best of them, scoring.cc) and assembles the
  // best group of request.nnodes; nullopt when no vendor has that many.
  std::optional<Placement> ScoreAndAssemble(CycleState& state, const std::vector<NodeView>& nodes,
                                            std::vector<NodeCandidate>& candidates) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The Permit plugins' say on an assembled placement.
  absl::StatusOr<Placement> PermitOrFail(CycleState& state, Placement placement, Diagnosis& diagnosis)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const NodeSummary& Summarise(size_t index, const NodeView& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t ClassOf(const NodeView& node, const DeviceView& dv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::vector<int>& PairTable(size_t index, const NodeView& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t ContextOf(const drivers::RunContext& context) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Verdict& VerdictFor(CycleState& state, const NodeView& node, const NodeSummary& summary, const ClassCount& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Plugins plugins_;
  std::vector<WorkloadAwarePlugin*> workload_aware_;  // those of plugins_.owned that weigh a job mix
  size_t nodes_to_score_;
  size_t nodes_to_find_;
  // Place keeps what it derived from the views between calls, so calls take turns.
  absl::Mutex mu_;
  std::map<DeviceClassKey, uint32_t> class_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<Vendor> class_vendor_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<bool, std::set<std::string>>, uint32_t> context_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<NodeSummary> summaries_ ABSL_GUARDED_BY(mu_);          // by index in the views
  std::vector<std::vector<Verdict>> verdicts_ ABSL_GUARDED_BY(mu_);  // [context][class]
  uint64_t decision_ ABSL_GUARDED_BY(mu_) = 0;
  RefusalMemo refusals_ ABSL_GUARDED_BY(mu_);
  // Nodes that cannot hold an ask are passed over unread (free_capacity_index.h), when the
  // profile has the filters the index answers for: Capacity (the cards), HostResources (the host).
  FreeCapacityIndex free_index_ ABSL_GUARDED_BY(mu_);
  bool index_devices_ ABSL_GUARDED_BY(mu_) = false;
  bool index_host_ = false;
  // The device filters whose waits mean plain use (cards busy): a refusal does not name them
  // among what held the job back.
  std::set<std::string> plain_use_filters_;
  // PlaceLocked's storage for its candidates' fitting devices, kept from decision to decision.
  std::vector<const DeviceView*> fitting_storage_ ABSL_GUARDED_BY(mu_);
};

// "1 node x 8 devices of one vendor (bf16, >= 80 GiB)": a request's shape in words.
std::string DescribeRequest(const PlacementRequest& request);

}  // namespace hetpool::scheduler
