#include "src/daemon/state/scheduling_cycle.h"

#include <algorithm>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/backend_factory.h"
#include "scheduler/framework/refusal_memo.h"
#include "google/protobuf/util/message_differencer.h"
#include "scheduler/framework/pending_reason.h"
#include "src/common/convert.h"
#include "src/daemon/launch/placement_binder.h"
#include "src/daemon/sharing/queue_order.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/pool_queries.h"
#include "src/daemon/state/quota_ledger.h"

namespace hetpool::daemon {
namespace {

// Marks the devices held for the head of the queue and for preemptors (and only those): the
// Reservation filter keeps the other jobs off them.
void MarkHeld(const std::map<std::string, std::set<std::string>>& held, scheduler::NodeView& view) {
  auto it = held.find(view.name);
  bool changed = false;
  for (auto& dv : view.devices) {
    const bool now_held = it != held.end() && it->second.contains(dv.device->id);
    changed = changed || dv.held != now_held;
    dv.held = now_held;
  }
  if (changed) view.generation = scheduler::ContentGeneration(view);
}

// The view of node `name` in `views` (in name order, as NodeViews builds them), or null.
scheduler::NodeView* ViewNamed(std::vector<scheduler::NodeView>& views, const std::string& name) {
  auto it = std::lower_bound(views.begin(), views.end(), name,
                             [](const scheduler::NodeView& v, const std::string& n) { return v.name < n; });
  return it == views.end() || it->name != name ? nullptr : &*it;
}

// What a node's view reads of its claims, as text: two claim sets with the same signature hold
// the same devices, shares and host resources.
std::string ClaimsSignature(const Claims& claims) {
  std::string out;
  for (const auto& [key, claim] : claims) {
    absl::StrAppend(&out, key.first, "/", key.second, ":", claim.device_milli, ",", claim.device_memory_mib, ",",
                    claim.cpu_milli, ",", claim.host_memory_mib);
    for (const std::string& id : claim.device_ids) absl::StrAppend(&out, ",", id);
    out.push_back(';');
  }
  return out;
}

// `a` and `b` together.
HeldCards Merged(HeldCards a, const HeldCards& b) {
  for (const auto& [node, devices] : b) a[node].insert(devices.begin(), devices.end());
  return a;
}

// Preemption attempts per pass: each asks the policy a few times, so a long queue of jobs that
// could preempt costs a bounded time; the rest try again in the next pass.
constexpr int kMaxPreemptionAttemptsPerPass = 16;
// Defragmentation attempts per full pass (the largest waiting jobs first, then the longest waiting).
constexpr int kMaxMoveAttemptsPerPass = 8;

// Binding is BindPlacement: claims, launch plans and the store, under the caller's lock.
class JobBinder final : public scheduler::Binder {
 public:
  JobBinder(JobTable& jobs, NodeRegistry& nodes, JobEntry& entry, const planner::PriceTable* prices)
      : jobs_(jobs), nodes_(nodes), entry_(entry), prices_(prices) {}
  absl::Status Bind(const scheduler::Placement& placement) override {
    static const planner::PriceTable kDefaults;
    return BindPlacement(jobs_, nodes_, entry_, placement, prices_ != nullptr ? *prices_ : kDefaults);
  }

 private:
  JobTable& jobs_;
  NodeRegistry& nodes_;
  JobEntry& entry_;
  const planner::PriceTable* prices_;
};

}  // namespace

SchedulingCycle::SchedulingCycle(JobTable& jobs, NodeRegistry& nodes, scheduler::PlacementPolicy* policy,
                                 AgentReconciler& reconciler, Wakeups& wakeups, CycleOptions options)
    : jobs_(jobs),
      nodes_(nodes),
      policy_(policy),
      wakeups_(wakeups),
      options_(std::move(options)),
      preemption_(jobs, nodes, reconciler, *policy, options_.preemption, options_.fair_share, options_.defrag),
      elastic_(jobs, nodes, reconciler, *policy, preemption_, options_.elastic_grow_after) {}

struct SchedulingCycle::PassState {
  std::vector<scheduler::NodeView> views;
  Reservation reserved;  // the head of the queue's
  Reservation held;      // `reserved` and every preemptor's cards: what the views mark held
  std::optional<QuotaLedger> quota;
  QueueOrder* queue = nullptr;  // its shares are read again after a placement

  // Marks `next` held on the views. Only the nodes it or the previous hold names can change, so
  // a pass with nothing held touches no view.
  void Hold(Reservation next) {
    std::set<std::string> touched;
    for (const auto& [node, devices] : held) touched.insert(node);
    for (const auto& [node, devices] : next) touched.insert(node);
    held = std::move(next);
    for (const auto& name : touched) {
      if (scheduler::NodeView* view = ViewNamed(views, name)) MarkHeld(held, *view);
    }
  }
};

void SchedulingCycle::Run(absl::Time now) {
  if (!wakeups_.capacity_changed() && now - last_full_pass_ < options_.full_pass_every &&
      now < elastic_.next_grow_check()) {
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

absl::Status SchedulingCycle::EverFits(const scheduler::PlacementRequest& request) {
  // A quota's answer changes with use, and a job across vendors' groups are not in the key.
  const bool rememberable = !request.Grouped() && !request.quota_blocked;
  std::string key;
  if (rememberable) {
    if (ever_fits_epoch_ != nodes_.lasting_epoch()) {
      ever_fits_.clear();
      ever_fits_epoch_ = nodes_.lasting_epoch();
    }
    key = scheduler::RefusalMemo::RequestKey(request);
    if (auto it = ever_fits_.find(key); it != ever_fits_.end()) return it->second;
  }
  auto placed = policy_->Place(request, NodeViews(/*all_free=*/true));
  // Only "never" refuses; anything else (no room now) is for the queue to find out.
  absl::Status answer =
      !placed.ok() && absl::IsFailedPrecondition(placed.status()) ? placed.status() : absl::OkStatus();
  if (rememberable) {
    constexpr size_t kMaxShapes = 4096;  // distinct request shapes; then start over
    if (ever_fits_.size() >= kMaxShapes) ever_fits_.clear();
    ever_fits_.emplace(std::move(key), answer);
  }
  return answer;
}

template <typename F>
void SchedulingCycle::ForEachCurrentView(bool all_free, F&& f) const {
  std::map<std::string, CachedView>& cache = all_free ? free_views_ : held_views_;
  auto cached = cache.begin();
  size_t index = 0;
  for (const auto& [name, node] : nodes_.entries()) {
    while (cached != cache.end() && cached->first < name) cached = cache.erase(cached);  // a node gone
    if (cached == cache.end() || cached->first != name) cached = cache.emplace_hint(cached, name, CachedView{});
    Current(cached->second, node, all_free);
    f(index++, name, cached->second);
    ++cached;
  }
  cache.erase(cached, cache.end());
}

std::vector<scheduler::NodeView> SchedulingCycle::NodeViews(bool all_free) const {
  std::vector<scheduler::NodeView> views;
  views.reserve(nodes_.entries().size());
  ForEachCurrentView(all_free, [&](size_t, const std::string&, const CachedView& cached) {
    views.push_back(cached.view);
  });
  return views;
}

void SchedulingCycle::SyncViews(std::vector<scheduler::NodeView>& views) {
  // An entry copied from the cached view as it is now (same build: its devices point into the
  // same inventory) with the same generation (which held marks change too) is that view.
  std::vector<uint64_t>& builds = working_view_builds_;
  bool same_nodes = views.size() == nodes_.entries().size() && builds.size() == views.size();
  ForEachCurrentView(false, [&](size_t i, const std::string& name, const CachedView& cached) {
    same_nodes = same_nodes && views[i].name == name;
    if (same_nodes && (builds[i] != cached.build || views[i].generation != cached.view.generation)) {
      views[i] = cached.view;
      builds[i] = cached.build;
    }
  });
  if (same_nodes) return;
  views.clear();  // a node came or went: copy them all
  builds.clear();
  ForEachCurrentView(false, [&](size_t, const std::string&, const CachedView& cached) {
    views.push_back(cached.view);
    builds.push_back(cached.build);
  });
}

scheduler::NodeView SchedulingCycle::ViewOf(const NodeEntry& node, bool all_free, const std::set<JobGen>* without) const {
  if (without != nullptr && !all_free) return BuildView(node, all_free, without);
  return Current((all_free ? free_views_ : held_views_)[node.record.name()], node, all_free);
}

const scheduler::NodeView& SchedulingCycle::Current(CachedView& cached, const NodeEntry& node, bool all_free) const {
  const bool schedulable = all_free || node.schedulable();
  bool current = !cached.view.name.empty() && cached.inventory_revision == node.inventory_revision &&
                 cached.schedulable == schedulable;
  // Claims untouched since they were last read are the same claims; touched ones may still be
  // (a heartbeat looks them up): compare what they hold before building the view again.
  if (!all_free && cached.claims_revision != node.claims.revision()) {
    std::string claims = ClaimsSignature(node.claims);
    current = current && claims == cached.claims;
    cached.claims = std::move(claims);
    cached.claims_revision = node.claims.revision();
  }
  if (!current) {
    cached.view = BuildView(node, all_free, nullptr);
    cached.build = ++view_builds_;
    cached.inventory_revision = node.inventory_revision;
    cached.schedulable = schedulable;
  }
  return cached.view;
}

scheduler::NodeView SchedulingCycle::BuildView(const NodeEntry& node, bool all_free, const std::set<JobGen>* without) const {
  scheduler::NodeView view;
  view.name = node.record.name();
  view.schedulable = all_free || node.schedulable();
  static const Claims kNoClaims;
  const Claims* claims = all_free ? &kNoClaims : &node.claims;
  Claims kept;
  if (without != nullptr && !all_free) {
    for (const auto& [key, claim] : node.claims) {
      if (!without->contains(key)) kept.emplace(key, claim);
    }
    claims = &kept;
  }
  // Shares held per device: whole claims take all of it, fractional ones their slice.
  const Holds holds = HoldsByDevice(*claims);
  view.context.torch_devices = node.inventory.torch_devices.empty() ? drivers::DefaultTorchDevices(node.inventory.devices)
                                                                    : node.inventory.torch_devices;
  view.context.metax_cuda_translation = options_.metax_cuda_translation;
  view.context.collectives = node.inventory.collectives;
  view.container_runtime = node.inventory.container_runtime;
  view.images = &node.inventory.images;
  if (auto rack = node.record.labels().find("rack"); rack != node.record.labels().end()) view.rack = rack->second;
  const HostFree host = HostFreeOf(node.inventory, *claims);
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
                              const Reservation& held) const {
  scheduler::NodeView* view = ViewNamed(views, name);
  const NodeEntry* node = nodes_.Find(name);
  if (view == nullptr || node == nullptr) return;
  *view = ViewOf(*node, false);
  MarkHeld(held, *view);
}

absl::StatusOr<scheduler::Placement> SchedulingCycle::Offer(JobEntry& entry, const scheduler::PlacementRequest& request,
                                                            PassState& pass) {
  JobBinder binder(jobs_, nodes_, entry, options_.prices);
  const absl::Time decision_start = absl::Now();
  // An elastic job takes as many nodes as fit, its max first; `request` (its min) is the last
  // try, and says why it waits.
  absl::StatusOr<scheduler::Placement> placement = absl::UnavailableError("not offered");
  for (int n : ElasticSizes(entry.job().spec())) {
    scheduler::PlacementRequest sized = request;
    sized.nnodes = n;
    placement = policy_->Schedule(sized, pass.views, binder);
    // Placed, or placed but not bound (no pending reason): either way no smaller size is tried.
    if (placement.ok() || !scheduler::HasPendingReason(placement.status())) break;
  }
  if (options_.observer != nullptr) options_.observer->Decision(absl::Now() - decision_start, placement.ok());
  if (!placement.ok()) return placement;
  if (pass.quota) pass.quota->HoldPlacement(entry.job().spec(), *placement, pass.views);
  if (FairShareLedger* const fair_share = options_.fair_share; fair_share != nullptr) {
    ForEachPlacedCard(*placement, pass.views, [&](const DeviceRecord& device, int64_t milli) {
      fair_share->Hold(entry.job().spec().group(), entry.job().spec().user(), CardClassOf(device), milli);
    });
    if (pass.queue != nullptr) pass.queue->SharesChanged(entry.job().spec().group());
  }
  for (const auto& assignment : placement->nodes) Refresh(pass.views, assignment.node, pass.held);
  return placement;
}

namespace {

// The job's placement request, with the Quota filter asking the ledger whether the owner may
// take more cards of a class.
scheduler::PlacementRequest RequestFor(const JobEntry& entry, const std::optional<QuotaLedger>& quota) {
  scheduler::PlacementRequest request = ToPlacementRequest(entry.job().spec());
  const pb::JobSpec& spec = entry.job().spec();
  if (quota && CardsNeeded(spec) > 0) {
    request.quota_blocked = [&quota, &spec](const DeviceRecord& device) { return quota->Blocked(spec, device); };
    request.quota_owner = absl::StrCat(spec.user(), "/", spec.group());
  }
  return request;
}

// Waiting on its owner's quota, not on the pool.
bool WaitsOnQuota(const std::optional<scheduler::PendingReason>& reason) {
  return reason.has_value() && reason->waiting_reasons.contains("Quota");
}

}  // namespace

void SchedulingCycle::OfferPreemptors(PassState& pass) {
  for (const std::string& id : preemption_.Preemptors()) {
    JobEntry* entry = jobs_.Find(id);
    if (entry == nullptr || entry->job().state() != pb::JOB_STATE_PENDING) {
      preemption_.Release(id);
      continue;
    }
    if (!preemption_.VictimsGone(id)) continue;
    // Its own cards are not held against it; every other preemptor's still are.
    pass.Hold(Merged(pass.reserved, preemption_.HeldForPreemptors(id)));
    const scheduler::PlacementRequest request = RequestFor(*entry, pass.quota);
    // Placed or not, the hold has done its work: a job that still does not fit (the pool
    // changed meanwhile) joins the queue again, and may preempt again.
    Offer(*entry, request, pass).IgnoreError();
    preemption_.Release(id);
  }
  pass.Hold(Merged(pass.reserved, preemption_.HeldForPreemptors()));
}

void SchedulingCycle::Pass(const std::vector<std::string>* only, absl::Time now) {
  const absl::Time started = absl::Now();
  FairShareLedger* const fair_share = options_.fair_share;
  if (fair_share != nullptr) {
    GroupHoldings holdings = HoldingsByGroup(nodes_, jobs_);
    fair_share->Observe(now, std::move(holdings.capacity), std::move(holdings.held));
  }
  // A pass for new submissions when there are none places nothing: the views of every node
  // (most of a pass's cost in a large pool) are not built for it. Each tick of an idle daemon
  // used to rebuild them all.
  if (only != nullptr && only->empty()) return;
  absl::Cleanup observe = [&] {
    if (options_.observer != nullptr) options_.observer->SchedulingPass(absl::Now() - started, only == nullptr);
  };
  PassState pass;
  // The first job that waits for capacity (the head of the queue) reserves the nodes closest to
  // holding it; jobs behind it may use other devices (backfill) but not the ones it could use
  // there, so they never delay it. Only one reservation: more would let a long queue of big
  // jobs idle the whole pool. A pass for new submissions only keeps the last full pass's.
  if (only != nullptr) pass.reserved = reserved_;
  if (options_.quotas != nullptr) pass.quota.emplace(HoldingsLedger(*options_.quotas, nodes_, jobs_));
  // The views are the last pass's, brought up to date (SyncViews); a placement refreshes only
  // the nodes it changed, so the policy re-reads only those (NodeView.generation). Copying every
  // node's view afresh was a fifth of a loaded daemon's CPU at 5,000 nodes.
  pass.views = std::move(working_views_);
  SyncViews(pass.views);
  absl::Cleanup keep_views = [&] { working_views_ = std::move(pass.views); };
  preemption_.NewPass();
  elastic_.NewPass();
  OfferPreemptors(pass);
  // The policy's queue order (the profile's QueueSort plugin: by default higher priority first,
  // then the group furthest below its fair share, then submission order).
  QueueOrder queue(jobs_.Pending(only), *policy_, fair_share);
  pass.queue = &queue;
  // The pool as it would be without some jobs' claims: what preemption asks the policy about.
  auto views_without = [&](const std::vector<std::pair<std::string, JobGen>>& claims) {
    std::map<std::string, std::set<JobGen>> by_node;
    for (const auto& [node, key] : claims) by_node[node].insert(key);
    std::vector<scheduler::NodeView> trial = pass.views;
    for (const auto& [name, without] : by_node) {
      scheduler::NodeView* view = ViewNamed(trial, name);
      const NodeEntry* node = nodes_.Find(name);
      if (view == nullptr || node == nullptr) continue;
      *view = ViewOf(*node, false, &without);
      MarkHeld(pass.held, *view);
    }
    return trial;
  };
  int preemption_attempts = 0;
  bool waits_for_capacity = false;  // some job still waits for cards: no elastic job grows
  std::vector<JobEntry*> scattered;  // waiting for capacity past --defrag-after: may have jobs moved
  const JobEntry* head = nullptr;    // the job pass.reserved is held for
  while (JobEntry* entry = queue.Next()) {
    if (preemption_.Waiting(entry->job().id())) continue;  // its victims are still stopping
    const scheduler::PlacementRequest request = RequestFor(*entry, pass.quota);
    auto placement = Offer(*entry, request, pass);
    if (placement.ok()) continue;
    // Decoded once: what it waits for decides the steps below and is recorded on the job.
    const std::optional<scheduler::PendingReason> reason = scheduler::PendingReasonOf(placement.status());
    if (!reason.has_value()) {  // placed but not bound: read the state again
      SyncViews(pass.views);
      pass.Hold(pass.held);
    }
    const bool for_capacity = absl::IsUnavailable(placement.status()) && !WaitsOnQuota(reason);
    if (for_capacity && preemption_attempts < kMaxPreemptionAttemptsPerPass) {
      ++preemption_attempts;
      // An elastic job shrinks before anything is preempted.
      if (elastic_.TryShrink(*entry, request, views_without, now) ||
          (preemption_.enabled() && preemption_.TryPreempt(*entry, request, pass.views, views_without, now))) {
        pass.Hold(Merged(pass.reserved, preemption_.HeldForPreemptors()));
        continue;
      }
    }
    if (for_capacity && only == nullptr && preemption_.MayMoveFor(*entry, now)) scattered.push_back(entry);
    waits_for_capacity = waits_for_capacity || for_capacity;
    const bool had_head = !pass.reserved.empty();
    NoteWaiting(*entry, request, placement.status(), reason.value_or(scheduler::PendingReason{}), pass.views,
                pass.reserved);
    if (!had_head && !pass.reserved.empty()) {
      head = entry;
      pass.Hold(Merged(pass.reserved, pass.held));
    }
  }
  if (only != nullptr) return;
  // Defragmentation: for the largest jobs first, then those that waited longest, wherever the
  // queue's order puts them (a gang behind a long queue of small jobs is the one fragmentation
  // starves).
  std::stable_sort(scattered.begin(), scattered.end(), [](const JobEntry* a, const JobEntry* b) {
    const int64_t cards_a = CardsNeeded(a->job().spec()), cards_b = CardsNeeded(b->job().spec());
    if (cards_a != cards_b) return cards_a > cards_b;
    return FromProtoTime(a->job().created_at()) < FromProtoTime(b->job().created_at());
  });
  int move_attempts = 0;
  for (JobEntry* entry : scattered) {
    if (move_attempts++ >= kMaxMoveAttemptsPerPass) break;
    // The head's own reservation is not held against it; once jobs move for it, its hold on
    // their cards takes the reservation's place.
    if (entry == head) pass.Hold(preemption_.HeldForPreemptors());
    const auto outcome = preemption_.TryMove(*entry, RequestFor(*entry, pass.quota), pass.views, views_without, now);
    if (entry == head && outcome == PreemptionStage::MoveOutcome::kMoved) pass.reserved.clear();
    pass.Hold(Merged(pass.reserved, preemption_.HeldForPreemptors()));
    // The hour's moves are kept for the first job that needs more than are left: smaller sets
    // for the jobs after it would spend them as they come back, and it would wait for ever.
    if (outcome == PreemptionStage::MoveOutcome::kOverBudget) break;
  }
  // Cards nobody waits for: an elastic job below its max may grow into them (one per pass).
  if (waits_for_capacity) {
    elastic_.Postpone();
  } else {
    elastic_.TryGrow([&](const JobEntry& entry) { return RequestFor(entry, pass.quota); }, views_without, now);
  }
  reserved_ = std::move(pass.reserved);
}

void SchedulingCycle::NoteWaiting(JobEntry& entry, const scheduler::PlacementRequest& request, absl::Status status,
                                  const scheduler::PendingReason& waited, std::vector<scheduler::NodeView>& views,
                                  Reservation& reserved) {
  pb::PendingReason why = ToProto(waited);
  if (auto quota = waited.waiting_reasons.find("Quota");
      quota != waited.waiting_reasons.end() && absl::IsUnavailable(status)) {
    // Waiting on its owner's quota, not on the pool: it holds no nodes for itself either.
    why.set_quota(quota->second);
  } else if (absl::IsUnavailable(status) && reserved.empty() && request.devices_per_node > 0) {
    reserved = ReservationFor(request, views);  // nothing is reserved for a head yet (it reads no held marks)
    if (!reserved.empty()) {  // the caller marks the views
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
  if (entry.job().reason() == reason && entry.job().message() == message &&
      google::protobuf::util::MessageDifferencer::Equals(entry.job().pending(), why)) {
    return;
  }
  // Why a job waits is recomputed every pass (and after a restart), so it is not written to the
  // store: the next state change carries it. Watchers still hear of it now.
  jobs_.SayWhyWaiting(entry, reason, message, std::move(why), reason);
}

SchedulingCycle::Reservation SchedulingCycle::ReservationFor(const scheduler::PlacementRequest& request,
                                                             const std::vector<scheduler::NodeView>& views) {
  // Per node: the qualifying devices of the vendor with the most of them, how many are free, and
  // how close the node is to holding the job: the least-free part of what it asks (devices, host
  // CPU, host memory), as a fraction of the ask.
  struct Option {
    std::string node;
    size_t free = 0;
    std::set<std::string> devices;
    double closeness = 0;
  };
  // `free` of `asked` of a host resource, as a fraction at most 1 (a node that does not report
  // the resource, its `total` 0, or a job that does not ask for it, is not limited by it).
  auto part = [](double free, double asked, double total) {
    return asked <= 0 || total <= 0 ? 1.0 : std::min(1.0, std::max(0.0, free) / asked);
  };
  std::vector<Option> options;
  scheduler::QualifyCache qualify(request.requirements);
  for (const auto& view : views) {
    if (!view.schedulable) continue;
    // A node without the host CPU or memory the job asks, in all, can never hold it: holding
    // its cards would keep others off them for nothing.
    if ((view.cpu_milli_total > 0 && request.cpu_milli > view.cpu_milli_total) ||
        (view.host_memory_total_mib > 0 && request.host_memory_mib > view.host_memory_total_mib)) {
      continue;
    }
    qualify.SetNode(view.context);
    std::map<Vendor, Option> by_vendor;
    for (const auto& dv : view.devices) {
      if (!dv.device->Placeable() || qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
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
    if (best == nullptr) continue;
    Option chosen = *best;
    const double cards = std::min(1.0, static_cast<double>(chosen.free) / std::max(1, request.devices_per_node));
    chosen.closeness = std::min({cards,
                                 part(static_cast<double>(view.cpu_milli_free), static_cast<double>(request.cpu_milli),
                                      static_cast<double>(view.cpu_milli_total)),
                                 part(static_cast<double>(view.host_memory_free_mib),
                                      static_cast<double>(request.host_memory_mib),
                                      static_cast<double>(view.host_memory_total_mib))});
    options.push_back(std::move(chosen));
  }
  if (static_cast<int>(options.size()) < request.nnodes) return {};
  // Closest first (a node with every card free but its cores taken is no closer than its cores
  // allow), then most free cards: those nodes are likely to hold the job soonest.
  std::stable_sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
    if (a.closeness != b.closeness) return a.closeness > b.closeness;
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
