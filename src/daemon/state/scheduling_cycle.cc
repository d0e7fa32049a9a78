#include "src/daemon/state/scheduling_cycle.h"

#include <algorithm>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/framework/refusal_memo.h"
#include "google/protobuf/util/message_differencer.h"
#include "scheduler/framework/pending_reason.h"
#include "src/common/convert.h"
#include "src/daemon/launch/placement_binder.h"
#include "src/daemon/sharing/queue_order.h"
#include "src/daemon/state/head_of_line_hold.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/pool_queries.h"
#include "src/daemon/state/quota_ledger.h"

namespace hetpool::daemon {
namespace {

// `held` and `cards` ("node/device": a job's avoided or shunned cards).
HeldCards WithCards(const google::protobuf::RepeatedPtrField<std::string>& cards, HeldCards held) {
  for (const std::string& card : cards) {
    const size_t slash = card.rfind('/');
    if (slash != std::string::npos) held[card.substr(0, slash)].insert(card.substr(slash + 1));
  }
  return held;
}

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
      views_(nodes, options_.metax_cuda_translation),
      preemption_(jobs, nodes, reconciler, *policy, options_.preemption, options_.fair_share, options_.defrag.window),
      defrag_(preemption_, *policy, options_.defrag),
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
  auto placed = policy_->Place(request, views_.Views(/*all_free=*/true));
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

std::vector<scheduler::NodeView> SchedulingCycle::NodeViews(bool all_free) const { return views_.Views(all_free); }

void SchedulingCycle::Refresh(std::vector<scheduler::NodeView>& views, const std::string& name,
                              const Reservation& held) const {
  scheduler::NodeView* view = ViewNamed(views, name);
  const NodeEntry* node = nodes_.Find(name);
  if (view == nullptr || node == nullptr) return;
  *view = views_.ViewOf(*node, false);
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
  if (options_.observer != nullptr)
    options_.observer->Decision(entry.job(), absl::Now() - decision_start, placement.ok());
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

PreemptionStage::ViewsWithout SchedulingCycle::ViewsWithoutClaims(PassState& pass) const {
  return [this, &pass](const std::vector<std::pair<std::string, JobGen>>& claims) {
    std::map<std::string, std::set<JobGen>> by_node;
    for (const auto& [node, key] : claims) by_node[node].insert(key);
    std::vector<scheduler::NodeView> trial = pass.views;
    for (const auto& [name, without] : by_node) {
      scheduler::NodeView* view = ViewNamed(trial, name);
      const NodeEntry* node = nodes_.Find(name);
      if (view == nullptr || node == nullptr) continue;
      *view = views_.ViewOf(*node, false, &without);
      MarkHeld(pass.held, *view);
    }
    return trial;
  };
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
  views_.Sync(pass.views);
  absl::Cleanup keep_views = [&] { working_views_ = std::move(pass.views); };
  preemption_.NewPass();
  elastic_.NewPass();
  OfferPreemptors(pass);
  // The policy's queue order (the profile's QueueSort plugin: by default higher priority first,
  // then the group furthest below its fair share, then submission order).
  QueueOrder queue(jobs_.Pending(only), *policy_, fair_share);
  pass.queue = &queue;
  const PreemptionStage::ViewsWithout views_without = ViewsWithoutClaims(pass);
  int preemption_attempts = 0;
  bool waits_for_capacity = false;   // some job still waits for cards: no elastic job grows
  std::vector<JobEntry*> scattered;  // waiting for capacity past --defrag-after: may have jobs moved
  const JobEntry* head = nullptr;    // the job pass.reserved is held for
  while (JobEntry* entry = queue.Next()) {
    if (preemption_.Waiting(entry->job().id())) continue;  // its victims are still stopping
    const scheduler::PlacementRequest request = RequestFor(*entry, pass.quota);
    // The cards its generations failed on with a hardware signature (Job.avoided_cards) are held
    // from this job alone: while it is offered room, and while the room it waits for is reserved.
    // (Copied only for such a job: the held cards can span many nodes, and the queue is long.)
    // The cards a generation failed on in its first seconds (Job.shunned_cards) are offered last:
    // held for a first offer, offered too when nothing else fits now.
    const pb::Job& job = entry->job();
    std::optional<Reservation> held_for_others;
    if (job.avoided_cards_size() > 0 || job.shunned_cards_size() > 0) {
      held_for_others = pass.held;
      pass.Hold(WithCards(job.shunned_cards(), WithCards(job.avoided_cards(), pass.held)));
    }
    auto placement = Offer(*entry, request, pass);
    if (job.shunned_cards_size() > 0 && absl::IsUnavailable(placement.status()) &&
        scheduler::HasPendingReason(placement.status())) {
      pass.Hold(WithCards(job.avoided_cards(), *held_for_others));
      placement = Offer(*entry, request, pass);
    }
    if (placement.ok()) {
      if (held_for_others) pass.Hold(*std::move(held_for_others));
      continue;
    }
    // Decoded once: what it waits for decides the steps below and is recorded on the job.
    const std::optional<scheduler::PendingReason> reason = scheduler::PendingReasonOf(placement.status());
    if (!reason.has_value()) {  // placed but not bound: read the state again
      views_.Sync(pass.views);
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
    if (for_capacity && only == nullptr && defrag_.MayMoveFor(*entry, now)) scattered.push_back(entry);
    waits_for_capacity = waits_for_capacity || for_capacity;
    const bool had_head = !pass.reserved.empty();
    NoteWaiting(*entry, request, placement.status(), reason.value_or(scheduler::PendingReason{}), pass.views,
                pass.reserved);
    if (held_for_others) pass.Hold(*std::move(held_for_others));
    if (!had_head && !pass.reserved.empty()) {
      head = entry;
      pass.Hold(Merged(pass.reserved, pass.held));
    }
  }
  if (only != nullptr) return;
  MoveForScattered(pass, std::move(scattered), head, views_without, now);
  // Cards nobody waits for: an elastic job below its max may grow into them (one per pass).
  if (waits_for_capacity) {
    elastic_.Postpone();
  } else {
    elastic_.TryGrow([&](const JobEntry& entry) { return RequestFor(entry, pass.quota); }, views_without, now);
  }
  reserved_ = std::move(pass.reserved);
}

void SchedulingCycle::MoveForScattered(PassState& pass, std::vector<JobEntry*> scattered, const JobEntry* head,
                                       const PreemptionStage::ViewsWithout& views_without, absl::Time now) {
  // For the largest jobs first, then those that waited longest, wherever the
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
    const auto outcome = defrag_.TryMove(*entry, RequestFor(*entry, pass.quota), pass.views, views_without, now);
    if (entry == head && outcome == DefragStage::MoveOutcome::kMoved) pass.reserved.clear();
    pass.Hold(Merged(pass.reserved, preemption_.HeldForPreemptors()));
    // The hour's moves are kept for the first job that needs more than are left: smaller sets
    // for the jobs after it would spend them as they come back, and it would wait for ever.
    if (outcome == DefragStage::MoveOutcome::kOverBudget) break;
  }
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
    reserved = HeadOfLineHold(request, views);  // nothing is reserved for a head yet (it reads no held marks)
    if (!reserved.empty()) {                    // the caller marks the views
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

}  // namespace hetpool::daemon
