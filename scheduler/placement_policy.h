// The placement interface and the views it decides on. The one implementation is the plugin
// framework (framework/framework.h), configured by a profile (framework/profile.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drivers/fingerprint/can_run.h"
#include "hetpool/device.h"

namespace hetpool::scheduler {

struct DeviceView {
  const DeviceRecord* device = nullptr;
  bool free = false;             // not held by any job at all (including processes being stopped)
  int32_t milli_free = 1000;     // share not held by fractional jobs
  uint64_t memory_free_mib = 0;  // device memory not held by fractional jobs
  bool held = false;             // held for the job first in line (the Reservation filter)
};

struct NodeView {
  std::string name;
  bool schedulable = false;  // Ready and not drained
  std::vector<DeviceView> devices;
  drivers::RunContext context;  // torch plugins on the node, translation layers enabled
  std::string rack;             // the node's "rack" label: multi-node jobs prefer one rack
  // Host CPU (milli-cores) and memory: the node's total and what claims leave free. A total of 0
  // means the node did not report it: not limited.
  int64_t cpu_milli_total = 0;
  int64_t cpu_milli_free = 0;
  uint64_t host_memory_total_mib = 0;
  uint64_t host_memory_free_mib = 0;
  // The node's container runtime ("" = none) and the images it holds (owned by the node's
  // inventory, which outlives the view; null = none).
  std::string container_runtime;
  const std::set<std::string>* images = nullptr;
  // Changes whenever anything above changes, and no two views of a pool share one
  // (ContentGeneration computes one), so a policy may keep what it derived from the view across
  // calls. 0: unknown, derived afresh on every call.
  uint64_t generation = 0;
};

// A non-zero hash of everything a NodeView holds that placement reads: for owners that rebuild
// their views rather than count changes.
uint64_t ContentGeneration(const NodeView& view);

struct Requirements {
  std::vector<Vendor> vendors;            // empty = any
  std::vector<std::string> models;        // empty = any
  std::vector<std::string> fingerprints;  // empty = any (jobs submitted by model name their class)
  drivers::RunRequirements run;           // code, precisions, memory per device, versions (CanRun)
  // Why `vendors` is narrower than the job asked, if it is ("the job names images only for
  // metax"): a card of another vendor is refused saying so. Last, so that the aggregate
  // initialisers written before it ({vendors, models, fingerprints}) still mean what they say.
  std::string vendors_why;
};

// One role group of a job across vendors: its own nodes, cards and requirements.
struct RoleGroup {
  std::string name;
  int nnodes = 1;
  int devices_per_node = 1;
  Requirements requirements;
};

struct PlacementRequest {
  int nnodes = 1;
  int devices_per_node = 0;  // 0 = a CPU job: no devices, any node
  Requirements requirements;
  int32_t device_milli = 1000;     // < 1000: a fractional share of one device per node
  uint64_t device_memory_mib = 0;  // fractional: memory held (0 = the same share of the memory)
  int64_t cpu_milli = 0;           // host CPU each node must have free (HostResources filter)
  uint64_t host_memory_mib = 0;    // host memory each node must have free
  // The owner's quota (the Quota filter): why the owner may not take more cards of a device's
  // class now; unset: no quota. Its answer may depend only on the device's vendor and
  // fingerprint class. `quota_owner` says whose quota it is (refusals of different owners are
  // remembered apart, refusal_memo.h).
  std::function<std::optional<std::string>(const DeviceRecord&)> quota_blocked;
  std::string quota_owner;
  // A job across vendors (role_groups.h): each group placed with its own shape and requirements
  // (the fields above give the rest: host resources, quota), all groups or none; nnodes is their
  // total. Or `mixed_vendors`: nnodes x devices_per_node, one vendor if one can hold it, else a
  // group per vendor. Whole cards only.
  std::vector<RoleGroup> groups;
  bool mixed_vendors = false;
  std::string collective;  // a job across vendors that asks for one (flagcx): only nodes that have it
  // A job in container images: the image per vendor ("" for a vendor it has none for: the
  // requirements already rule those out). Only nodes with a container runtime take it
  // (ContainerRuntime filter); those holding its image are preferred (ImageLocality score).
  bool in_image = false;
  std::map<Vendor, std::string> images;

  bool Grouped() const { return !groups.empty() || mixed_vendors; }
  bool Fractional() const { return device_milli > 0 && device_milli < 1000; }
};

struct NodeAssignment {
  std::string node;
  std::vector<std::string> device_ids;
  int link_score = 0;              // average pairwise link score of the devices (link_score.h)
  int32_t device_milli = 1000;     // share held on each device
  uint64_t device_memory_mib = 0;  // memory held on each device
  Vendor vendor = Vendor::kCpu;    // the node's cards' vendor (every node of a group shares one)
  std::string group;               // a job across vendors: the node's role group
};

struct Placement {
  // Every rank of a job shares one collective domain, except a job across vendors: its groups'
  // vendors are in each NodeAssignment and this is the first group's.
  Vendor vendor = Vendor::kCpu;
  std::vector<NodeAssignment> nodes;  // in node-rank order (a job across vendors: group by group)
  bool Mixed() const {
    for (const auto& n : nodes) {
      if (n.vendor != vendor) return true;
    }
    return false;
  }
};

// Result meaning follows the Kubernetes scheduler: UNAVAILABLE = cannot be placed now but may be
// later (capacity busy); FAILED_PRECONDITION = no node of the pool could ever run it.
// Implemented by the daemon: makes a placement real (claims, launch plans, store). Non-OK leaves
// the job pending.
class Binder {
 public:
  virtual ~Binder() = default;
  virtual absl::Status Bind(const Placement& placement) = 0;
};

// A job waiting in the queue, as queue ordering sees it.
struct QueuedJob {
  int priority = 0;         // higher first, by default
  uint64_t submit_seq = 0;  // submission order
  double share = 0;         // its group's fair share (lower first, FairShare); 0 without --queues
};

// The default queue order: higher priority first, then submission order.
bool ByPriorityThenSubmission(const QueuedJob& a, const QueuedJob& b);

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // Whether `a` is offered placement before `b` in a scheduling cycle (a strict weak order).
  // Default: ByPriorityThenSubmission. The framework asks its QueueSort plugin.
  virtual bool QueueLess(const QueuedJob& a, const QueuedJob& b) const { return ByPriorityThenSubmission(a, b); }
  virtual absl::StatusOr<Placement> Place(const PlacementRequest& request, const std::vector<NodeView>& nodes) = 0;
  // A job entered the queue (once per job): policies that weigh the mix of submitted shapes
  // (the framework's Fgd with "mix": "submitted") count it. Default: nothing.
  virtual void NoteSubmitted(const PlacementRequest&) {}
  // Place, then bind. Policies with state that follows placements (the framework's Reserve
  // plugins) override it to reserve before and unreserve when binding fails.
  virtual absl::StatusOr<Placement> Schedule(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                             Binder& binder) {
    auto placement = Place(request, nodes);
    if (!placement.ok()) return placement;
    if (absl::Status s = binder.Bind(*placement); !s.ok()) return s;
    return placement;
  }
};

// Whether a device could run the job at all (ignoring whether it is free or healthy), and why not.
drivers::CanRunResult Qualifies(const DeviceRecord& device, const Requirements& requirements,
                                const drivers::RunContext& node);

// Qualifies, remembered per (fingerprint, node context) for one placement decision: cards of one
// fingerprint class are interchangeable, so a 40,000-card pool needs a handful of CanRun calls
// instead of one per card. Cards without a fingerprint are judged one by one.
class QualifyCache {
 public:
  explicit QualifyCache(const Requirements& requirements) : requirements_(requirements) {}
  // Call once per node before asking about its devices.
  void SetNode(const drivers::RunContext& node);
  const drivers::CanRunResult& Get(const DeviceRecord& device);

 private:
  using ByFingerprint = std::map<std::string, drivers::CanRunResult, std::less<>>;
  const Requirements& requirements_;
  const drivers::RunContext* node_ = nullptr;
  std::map<std::string, ByFingerprint, std::less<>> by_context_;
  ByFingerprint* current_ = nullptr;
  const ByFingerprint::value_type* last_ = nullptr;  // the previous hit in current_
  drivers::CanRunResult scratch_;
};

// Device memory a request holds on `device` (the explicit amount, or its share of the memory).
uint64_t MemoryHeld(const PlacementRequest& request, const DeviceRecord& device);
// Whether the device can take the request now: whole requests need it entirely free, fractional
// ones enough milli and memory left.
bool Available(const PlacementRequest& request, const DeviceView& view);

// What a placement takes of one node's view (its devices' shares and memory, the host's CPU and
// memory), for owners of views that play placements forward without rebuilding them. The caller
// gives the view its new generation.
void TakeOnView(const PlacementRequest& request, const NodeAssignment& assignment, NodeView& view);
// What TakeOnView took, given back when the job ends (a card whose whole share is back is free
// again). The caller gives the view its new generation.
void GiveBackOnView(const PlacementRequest& request, const NodeAssignment& assignment, NodeView& view);
// The whole placement taken on `views` (found by name), each changed view given its new generation.
void TakeOnViews(const PlacementRequest& request, const Placement& placement, std::vector<NodeView>& views);

}  // namespace hetpool::scheduler
