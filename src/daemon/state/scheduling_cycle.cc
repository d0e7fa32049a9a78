#include "src/daemon/state/scheduling_cycle.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/backend_factory.h"
#include "google/protobuf/util/message_differencer.h"
#include "scheduler/framework/pending_reason.h"
#include "src/daemon/launch/placement_binder.h"
#include "src/daemon/sharing/queue_order.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/pool_queries.h"
#include "src/daemon/state/quota_ledger.h"

namespace hetpool::daemon {
namespace {

// Marks the devices held for the head of the queue; the Reservation filter keeps the jobs behind
// it off them.
void MarkHeld(const std::map<std::string, std::set<std::string>>& reserved, scheduler::NodeView& view) {
  auto it = reserved.find(view.name);
  if (it == reserved.end()) return;
  for (auto& dv : view.devices) dv.held = it->second.contains(dv.device->id);
  view.generation = scheduler::ContentGeneration(view);
}

// Binding is BindPlacement: claims, launch plans and the store, under the caller's lock.
class JobBinder final : public scheduler::Binder {
 public:
  JobBinder(JobTable& jobs, NodeRegistry& nodes, JobEntry& entry) : jobs_(jobs), nodes_(nodes), entry_(entry) {}
  absl::Status Bind(const scheduler::Placement& placement) override {
    return BindPlacement(jobs_, nodes_, entry_, placement);
  }

 private:
  JobTable& jobs_;
  NodeRegistry& nodes_;
  JobEntry& entry_;
};

}  // namespace

SchedulingCycle::SchedulingCycle(JobTable& jobs, NodeRegistry& nodes, scheduler::PlacementPolicy* policy,
                                 Wakeups& wakeups, CycleOptions options)
    : jobs_(jobs), nodes_(nodes), policy_(policy), wakeups_(wakeups), options_(std::move(options)) {}

void SchedulingCycle::Run(absl::Time now) {
  if (!wakeups_.capacity_changed() && now - last_full_pass_ < options_.full_pass_every) {
    std::vector<std::string> fresh;
    fresh.swap(new_jobs_);
    Pass(&fresh, now);
    return;
  }
  wakeups_.TakeCapacityChanged();
  new_jobs_.clear();
  last_full_pass_ = now;
  Pass(nullptr, now);
}

std::vector<scheduler::NodeView> SchedulingCycle::NodeViews(bool all_free) const {
  std::vector<scheduler::NodeView> views;
  views.reserve(nodes_.entries().size());
  for (const auto& [name, node] : nodes_.entries()) views.push_back(ViewOf(node, all_free));
  return views;
}

scheduler::NodeView SchedulingCycle::ViewOf(const NodeEntry& node, bool all_free) const {
  scheduler::NodeView view;
  view.name = node.record.name();
  view.schedulable = all_free || node.schedulable();
  // Shares held per device: whole claims take all of it, fractional ones their slice.
  const Holds holds = all_free ? Holds{} : HoldsByDevice(node.claims);
  view.context.torch_devices = node.inventory.torch_devices.empty() ? drivers::DefaultTorchDevices(node.inventory.devices)
                                                                    : node.inventory.torch_devices;
  view.context.metax_cuda_translation = options_.metax_cuda_translation;
  if (auto rack = node.record.labels().find("rack"); rack != node.record.labels().end()) view.rack = rack->second;
  static const Claims kNoClaims;
  const HostFree host = HostFreeOf(node.inventory, all_free ? kNoClaims : node.claims);
  view.cpu_milli_total = host.cpu_milli_total;
  view.cpu_milli_free = host.cpu_milli;
  view.host_memory_total_mib = host.memory_total_mib;
  view.host_memory_free_mib = host.memory_mib;
  for (const auto& device : node.inventory.devices) {
    const DeviceFree free = FreeOf(device, HoldOn(holds, device.id));
    view.devices.push_back({&device, free.whole, free.milli, free.memory_mib});
  }
  view.generation = scheduler::ContentGeneration(view);  // the policy re-reads only changed nodes
  return view;
}

void SchedulingCycle::Refresh(std::vector<scheduler::NodeView>& views, const std::string& name,
                              const Reservation& reserved) const {
  auto it = std::lower_bound(views.begin(), views.end(), name,
                             [](const scheduler::NodeView& v, const std::string& n) { return v.name < n; });
  const NodeEntry* node = nodes_.Find(name);
  if (it == views.end() || it->name != name || node == nullptr) return;
  *it = ViewOf(*node, false);
  MarkHeld(reserved, *it);
}

void SchedulingCycle::Pass(const std::vector<std::string>* only, absl::Time now) {
  FairShareLedger* const fair_share = options_.fair_share;
  if (fair_share != nullptr) {
    GroupHoldings holdings = HoldingsByGroup(nodes_, jobs_);
    fair_share->Observe(now, std::move(holdings.capacity), std::move(holdings.held));
  }
  // The policy's queue order (the profile's QueueSort plugin: by default higher priority first,
  // then the group furthest below its fair share, then submission order).
  QueueOrder queue(jobs_.Pending(only), *policy_, fair_share);
  // The first job that waits for capacity (the head of the queue) reserves the nodes closest to
  // holding it; jobs behind it may use other devices (backfill) but not the ones it could use
  // there, so they never delay it. Only one reservation: more would let a long queue of big
  // jobs idle the whole pool. A pass for new submissions only keeps the last full pass's.
  Reservation reserved;
  if (only != nullptr) reserved = reserved_;
  std::optional<QuotaLedger> ledger;
  if (options_.quotas != nullptr) ledger.emplace(HoldingsLedger(*options_.quotas, nodes_, jobs_));
  // The views are built once per pass; a placement refreshes only the nodes it changed, so the
  // policy re-reads only those (NodeView.generation).
  std::vector<scheduler::NodeView> views = NodeViews(false);
  for (auto& view : views) MarkHeld(reserved, view);
  while (JobEntry* entry = queue.Next()) {
    scheduler::PlacementRequest request = ToPlacementRequest(entry->job.spec());
    // The Quota filter asks the ledger whether the owner may take more cards of a class.
    const pb::JobSpec& spec = entry->job.spec();
    if (ledger && CardsNeeded(spec) > 0) {
      request.quota_blocked = [&ledger, &spec](const DeviceRecord& device) { return ledger->Blocked(spec, device); };
      request.quota_owner = absl::StrCat(spec.user(), "/", spec.group());
    }
    JobBinder binder(jobs_, nodes_, *entry);
    const absl::Time decision_start = absl::Now();
    auto placement = policy_->Schedule(request, views, binder);
    if (options_.observer != nullptr) options_.observer->Decision(absl::Now() - decision_start, placement.ok());
    if (placement.ok()) {
      if (ledger) ledger->HoldPlacement(entry->job.spec(), *placement, views);
      if (fair_share != nullptr) {
        ForEachPlacedCard(*placement, views, [&](const DeviceRecord& device, int64_t milli) {
          fair_share->Hold(entry->job.spec().group(), CardClassOf(device), milli);
        });
        queue.SharesChanged();
      }
      for (const auto& assignment : placement->nodes) Refresh(views, assignment.node, reserved);
      continue;
    }
    if (!scheduler::PendingReasonOf(placement.status()).has_value()) {  // placed but not bound: read the state again
      views = NodeViews(false);
      for (auto& view : views) MarkHeld(reserved, view);
    }
    NoteWaiting(*entry, request, placement.status(), views, reserved);
  }
  if (only == nullptr) reserved_ = std::move(reserved);
}

void SchedulingCycle::NoteWaiting(JobEntry& entry, const scheduler::PlacementRequest& request, absl::Status status,
                                  std::vector<scheduler::NodeView>& views, Reservation& reserved) {
  const scheduler::PendingReason waited = scheduler::PendingReasonOf(status).value_or(scheduler::PendingReason{});
  pb::PendingReason why = ToProto(waited);
  if (auto quota = waited.waiting_reasons.find("Quota");
      quota != waited.waiting_reasons.end() && absl::IsUnavailable(status)) {
    // Waiting on its owner's quota, not on the pool: it holds no nodes for itself either.
    why.set_quota(quota->second);
  } else if (absl::IsUnavailable(status) && reserved.empty() && request.devices_per_node > 0) {
    reserved = ReservationFor(request, views);  // nothing is reserved yet: these are the plain views
    if (!reserved.empty()) {
      for (auto& view : views) MarkHeld(reserved, view);
      std::vector<std::string> names;
      for (const auto& [node, devices] : reserved) names.push_back(node);
      why.set_held_for_it(absl::StrJoin(names, ","));
      status = absl::UnavailableError(
          absl::StrCat(status.message(), "; first in line: holding ", absl::StrJoin(names, ","), " for it"));
    }
  }
  if (why.needs().empty()) why.set_never_fits(absl::IsFailedPrecondition(status));
  // Still pending: record why, once per distinct reason.
  const std::string reason = absl::IsFailedPrecondition(status) ? "Unresolvable" : "Unschedulable";
  const std::string message = std::string(status.message());
  if (entry.job.reason() == reason && entry.job.message() == message &&
      google::protobuf::util::MessageDifferencer::Equals(entry.job.pending(), why)) {
    return;
  }
  entry.job.set_reason(reason);
  entry.job.set_message(message);
  *entry.job.mutable_pending() = std::move(why);
  jobs_.AddEvent(entry.job, reason, message);
  // Why a job waits is recomputed every pass (and after a restart), so it is not written to the
  // store: the next state change carries it. Watchers still hear of it now.
  jobs_.Touch(entry);
}

SchedulingCycle::Reservation SchedulingCycle::ReservationFor(const scheduler::PlacementRequest& request,
                                                             const std::vector<scheduler::NodeView>& views) {
  // Per node: the qualifying devices of the vendor with the most of them, and how many are free.
  struct Option {
    std::string node;
    size_t free = 0;
    std::set<std::string> devices;
  };
  std::vector<Option> options;
  scheduler::QualifyCache qualify(request.requirements);
  for (const auto& view : views) {
    if (!view.schedulable) continue;
    qualify.SetNode(view.context);
    std::map<Vendor, Option> by_vendor;
    for (const auto& dv : view.devices) {
      if (!dv.device->healthy || qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
      Option& o = by_vendor[dv.device->vendor];
      o.node = view.name;
      o.devices.insert(dv.device->id);
      o.free += scheduler::Available(request, dv) ? 1 : 0;
    }
    const Option* best = nullptr;
    for (const auto& [vendor, o] : by_vendor) {
      if (static_cast<int>(o.devices.size()) < request.devices_per_node) continue;
      if (best == nullptr || o.free > best->free) best = &o;
    }
    if (best != nullptr) options.push_back(*best);
  }
  if (static_cast<int>(options.size()) < request.nnodes) return {};
  // Most free first: those nodes are likely to hold the job soonest.
  std::stable_sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
    if (a.free != b.free) return a.free > b.free;
    return a.node < b.node;
  });
  Reservation out;
  for (int i = 0; i < request.nnodes; ++i) {
    const Option& o = options[static_cast<size_t>(i)];
    out[o.node] = o.devices;
  }
  return out;
}

}  // namespace hetpool::daemon
