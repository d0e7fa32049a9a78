// The scheduling framework's extension points, after the Kubernetes scheduler framework:
// QueueSort (which waiting job is offered placement first), PreFilter (the request as a whole), Filter (nodes and their
// devices), Score + NormalizeScore (rank the nodes that pass), Permit (the assembled gang), Reserve / Unreserve (plugin
// state that follows a placement) and Bind (the daemon makes the placement real through its Binder,
// placement_policy.h).
// Plugins are named, configured by the JSON profile (profile.h) and run in profile order.
// PreFilter, Filter and Permit plugins decide from the request and the views alone (no state of
// their own): the framework judges device classes once per decision and remembers refusals on
// unchanged views (refusal_memo.h) on that promise.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/placement_policy.h"

namespace hetpool::scheduler {

// Kubernetes' Unschedulable vs UnschedulableAndUnresolvable: whether waiting can help.
enum class Rejection { kWaiting, kNever };

struct FilterVerdict {
  Rejection rejection = Rejection::kWaiting;
  std::string reason;
};

// What one Place call knows, shared by its plugins.
struct CycleState {
  explicit CycleState(const PlacementRequest& r) : request(r), qualify(r.requirements) {}
  const PlacementRequest& request;
  QualifyCache qualify;  // CanRun verdicts per fingerprint class and node context
};

// One node's option for the job: its devices of one vendor that pass every filter, and the ones
// the device selection picked.
struct NodeCandidate {
  const NodeView* node = nullptr;
  Vendor vendor = Vendor::kCpu;
  std::span<const DeviceView* const> fitting;  // storage owned by the Place call
  // 1 when some device of `vendor` on the node is not free, 0 when all are, as the framework's
  // node summary knows without reading the devices; -1: not known (read the devices).
  int8_t vendor_in_use = -1;
  std::vector<const DeviceView*> chosen;
  int link_score = 0;
};

// What a filter declares it judges, so the framework may answer for it without asking (the free-
// capacity index rules out the nodes such a filter would) or read its verdicts for what they are.
enum class FilterJudges : uint32_t {
  kFreeDevices = 1,  // whole cards and shares free, as the free-capacity index keeps them
  kFreeHost = 2,     // host CPU and memory free, likewise
  kPlainUse = 4,     // its waits mean the cards are busy, not that a policy holds them back
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual absl::string_view Name() const = 0;
  // Bits of FilterJudges; none by default.
  virtual uint32_t Judgements() const { return 0; }
  bool Judges(FilterJudges what) const { return (Judgements() & static_cast<uint32_t>(what)) != 0; }
};

class QueueSortPlugin : public virtual Plugin {
 public:
  // Whether `a` is offered placement before `b` (a strict weak order).
  virtual bool Less(const QueuedJob& a, const QueuedJob& b) const = 0;
};

class PreFilterPlugin : public virtual Plugin {
 public:
  // FAILED_PRECONDITION: no pool could run the request; UNAVAILABLE: not now.
  virtual absl::Status PreFilter(CycleState& state) = 0;
};

// Node-level filters run on nodes that have enough devices that could ever run the job.
class NodeFilterPlugin : public virtual Plugin {
 public:
  virtual std::optional<FilterVerdict> FilterNode(CycleState& state, const NodeView& node) = 0;
};

// Device-level filters. Those whose rejections are kNever decide whether a node could ever hold
// the job; the kWaiting ones whether it can now.
class DeviceFilterPlugin : public virtual Plugin {
 public:
  virtual std::optional<FilterVerdict> FilterDevice(CycleState& state, const NodeView& node,
                                                    const DeviceView& device) = 0;
};

class ScorePlugin : public virtual Plugin {
 public:
  // Higher is better. Candidates of one Place call are scored by every score plugin.
  virtual int64_t Score(CycleState& state, const NodeCandidate& candidate) = 0;
  // Whether Score reads candidate.chosen / link_score. Those plugins score only the best
  // candidates of the others (Framework: kNodesToScore), since choosing devices costs more.
  virtual bool NeedsDeviceSelection() const { return false; }
  // Maps the raw scores of one call onto 0..100. Default: min-max (all equal: all 100).
  virtual void NormalizeScore(std::vector<int64_t>& scores);
};

class PermitPlugin : public virtual Plugin {
 public:
  // Non-OK withholds the placement: UNAVAILABLE waits, FAILED_PRECONDITION never.
  virtual absl::Status Permit(CycleState& state, const Placement& placement) = 0;
};

// A kind of job the pool expects, with its share of the jobs: what FGD weighs fragmentation
// against when the operator (or a replay of a known trace) declares the mix up front.
struct WorkloadShape {
  int64_t cpu_milli = 0;            // host CPU per node
  int devices = 0;                  // 0: a CPU job
  int32_t device_milli = 1000;      // < 1000: a share of one device
  std::vector<std::string> models;  // allowed device models; empty = any
  double weight = 0;                // share of the jobs (the shapes' weights sum to 1)
};

class WorkloadAwarePlugin : public virtual Plugin {
 public:
  // Replaces the expected mix (empty: none declared).
  virtual void ExpectWorkload(const std::vector<WorkloadShape>& shapes) = 0;
  // A job was submitted (once per job, whether or not it can be placed now).
  virtual void NoteSubmitted(const PlacementRequest& request) = 0;
};

class ReservePlugin : public virtual Plugin {
 public:
  virtual void Reserve(const PlacementRequest& request, const Placement& placement) = 0;
  // Undoes Reserve when binding fails.
  virtual void Unreserve(const PlacementRequest& request, const Placement& placement) = 0;
};

}  // namespace hetpool::scheduler
