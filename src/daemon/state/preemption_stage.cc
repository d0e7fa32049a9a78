#include "src/daemon/state/preemption_stage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/quota_ledger.h"

namespace hetpool::daemon {
namespace {

// A group is above its share past this (rounding of fractional cards aside).
constexpr double kShareSlack = 1e-9;

}  // namespace

VictimRequest VictimRequestOf(const scheduler::PlacementRequest& request) {
  return {request.nnodes, request.devices_per_node, request.device_milli, request.cpu_milli, request.host_memory_mib};
}

absl::StatusOr<PreemptionMode> ParsePreemptionMode(const std::string& text) {
  if (text == "off") return PreemptionMode::kOff;
  if (text == "priority") return PreemptionMode::kPriority;
  if (text == "fair-share") return PreemptionMode::kFairShare;
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not one of off, priority, fair-share"));
}

PreemptionStage::PreemptionStage(JobTable& jobs, NodeRegistry& nodes, AgentReconciler& reconciler,
                                 scheduler::PlacementPolicy& policy, PreemptionMode mode,
                                 const FairShareLedger* fair_share, absl::Duration defrag_window)
    : jobs_(jobs),
      nodes_(nodes),
      reconciler_(reconciler),
      policy_(policy),
      mode_(mode),
      fair_share_(fair_share),
      defrag_window_(defrag_window),
      holds_(jobs, nodes) {}

void PreemptionStage::GatherCandidates(absl::Time now) {
  candidates_.emplace();
  // The pass's time as a placement stores it (whole nanoseconds): a clock with finer ticks (the
  // trace replay's) would otherwise see a job placed by this very pass as placed before it.
  const absl::Time this_pass = FromProtoTime(ToProtoTime(now));
  // Claims tell which jobs run where; a job any of whose claims is being stopped is not one.
  const std::set<std::string> stopping = ForEachKeptClaim(
      nodes_, [&](const std::string& name, const NodeEntry& node, const JobGen& key, const Claim& claim) {
        JobEntry* entry = jobs_.Find(key.first);
        if (entry == nullptr || entry->job().generation() != key.second) return;
        const pb::JobState state = entry->job().state();
        if (state != pb::JOB_STATE_SCHEDULED && state != pb::JOB_STATE_RUNNING) return;
        // Placed by this very pass, ahead of the waiting job in the queue's order: not undone.
        if (FromProtoTime(entry->job().scheduled_at()) >= this_pass) return;
        Candidate& c = (*candidates_)[key.first];
        c.entry = entry;
        c.claims.emplace_back(name, key);
        for (const auto& device : node.inventory.devices) {
          if (std::find(claim.device_ids.begin(), claim.device_ids.end(), device.id) != claim.device_ids.end()) {
            c.classes.insert(CardClassOf(device));
          }
        }
      });
  for (auto it = candidates_->begin(); it != candidates_->end();) {
    if (stopping.contains(it->first)) {
      it = candidates_->erase(it);
      continue;
    }
    Candidate& c = it->second;
    const pb::Job& job = c.entry->job();
    c.job.id = job.id();
    c.priority = job.spec().priority();
    c.group = job.spec().group();
    c.user = job.spec().user();
    c.bought_by_moves = job.has_moved_for_at() && now - FromProtoTime(job.moved_for_at()) < defrag_window_;
    // Work since the generation started running (a scheduled one that has not started loses none).
    const double cards = static_cast<double>(CardsNeeded(job.spec())) / 1000;
    c.job.cards = cards;
    c.job.started = job.state() == pb::JOB_STATE_RUNNING ? FromProtoTime(job.started_at()) : now;
    c.job.lost_card_seconds =
        LostCardSeconds(cards, c.job.started, FromProtoDuration(job.spec().checkpoint_interval()), now);
    ++it;
  }
}

std::optional<std::string> PreemptionStage::MayStop(const JobEntry& entry, const Candidate& c,
                                                    ShareMemo& shares) const {
  const pb::JobSpec& spec = entry.job().spec();
  if (c.priority < spec.priority()) return absl::StrCat("priority ", c.priority, " < ", spec.priority());
  if (mode_ != PreemptionMode::kFairShare || fair_share_ == nullptr) return std::nullopt;
  if (c.priority > spec.priority()) return std::nullopt;
  // Reclaim waits until the place that moves bought has been kept a window long. (On the trace,
  // one group's jobs placed by moves were taken back within the minute by another group's
  // arrivals, and each then had more jobs moved for it: the first hour's moves bought nothing.)
  if (c.bought_by_moves) return std::nullopt;
  if (c.group == spec.group()) return MayStopWithinGroup(spec, c);
  // Memoised per attempt; an empty class stands for the group's dominant share.
  auto share = [&](const std::string& group, const CardClass& card_class) {
    auto [it, fresh] = shares.try_emplace({group, card_class}, 0.0);
    if (fresh) {
      it->second =
          card_class == CardClass{} ? fair_share_->HeldShare(group) : fair_share_->ClassShare(group, card_class);
    }
    return it->second;
  };
  // Reclaim: the victim's group borrows (its dominant share of the cards it holds is above 1),
  // and does so in a class of cards the victim holds; the waiting job's group is below its own.
  // Dominant shares first, not class by class alone: a group over its share in one class does
  // not take cards back in another. (Tried on the trace with four groups, one submitting 55% of
  // the pods: class by class alone stopped six times as many jobs and lost 7 points of GPU
  // allocation for shares hardly more even.)
  if (share(c.group, {}) <= 1 + kShareSlack || share(spec.group(), {}) >= 1 - kShareSlack) return std::nullopt;
  for (const CardClass& card_class : c.classes) {
    const double victim_share = share(c.group, card_class);
    if (victim_share <= 1 + kShareSlack) continue;
    return absl::StrFormat("group %s above its fair share of %s cards (%.2f), group %s below its own", c.group,
                           card_class.second.empty() ? card_class.first : card_class.second, victim_share,
                           spec.group());
  }
  return std::nullopt;
}

std::optional<std::string> PreemptionStage::MayStopWithinGroup(const pb::JobSpec& waiting, const Candidate& c) const {
  // The same rule as between groups, one level down (Slurm's fair tree): the victim's user holds
  // more than its part of the group's cards, in a class the victim holds; the waiting user less.
  if (c.user == waiting.user()) return std::nullopt;
  if (fair_share_->UserHeldShare(c.group, c.user) <= 1 + kShareSlack ||
      fair_share_->UserHeldShare(c.group, waiting.user()) >= 1 - kShareSlack) {
    return std::nullopt;
  }
  for (const CardClass& card_class : c.classes) {
    const double victim_share = fair_share_->UserClassShare(c.group, c.user, card_class);
    if (victim_share <= 1 + kShareSlack) continue;
    return absl::StrFormat("user %s above its part of group %s's %s cards (%.2f), user %s below its own", c.user,
                           c.group, card_class.second.empty() ? card_class.first : card_class.second, victim_share,
                           waiting.user());
  }
  return std::nullopt;
}

std::vector<NodeOffer> PreemptionStage::Offers(const scheduler::PlacementRequest& request,
                                               const std::vector<scheduler::NodeView>& views,
                                               const std::map<std::string, const PreemptibleJob*>& stoppable) const {
  std::vector<NodeOffer> offers;
  scheduler::QualifyCache qualify(request.requirements);
  for (const auto& view : views) {
    const NodeEntry* node = nodes_.Find(view.name);
    if (!view.schedulable || node == nullptr) continue;
    qualify.SetNode(view.context);
    NodeOffer offer;
    offer.node = view.name;
    offer.host_limited = view.cpu_milli_total > 0 || view.host_memory_total_mib > 0;
    // A total of 0 is no limit: as much as the job asks counts as free.
    offer.cpu_milli_free = view.cpu_milli_total > 0 ? view.cpu_milli_free : request.cpu_milli;
    offer.memory_free_mib = view.host_memory_total_mib > 0 ? view.host_memory_free_mib : request.host_memory_mib;
    // Who holds each device, and how much of it; and the host the stoppable jobs hold.
    std::map<std::string, std::vector<std::pair<const PreemptibleJob*, int32_t>>> holders;
    for (const auto& [key, claim] : node->claims) {
      auto it = stoppable.find(key.first);
      const PreemptibleJob* job = claim.desired && it != stoppable.end() ? it->second : nullptr;
      for (const auto& id : claim.device_ids) holders[id].emplace_back(job, claim.device_milli);
      if (job != nullptr && (claim.cpu_milli > 0 || claim.host_memory_mib > 0)) {
        offer.host_holders.push_back({job, claim.cpu_milli, claim.host_memory_mib});
      }
    }
    for (const auto& dv : view.devices) {
      if (dv.held || !dv.device->Placeable()) continue;
      if (qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
      CardOffer card{dv.device->id, dv.device->vendor, dv.free, dv.milli_free, {}};
      if (auto h = holders.find(dv.device->id); h != holders.end()) card.holders = h->second;
      offer.cards.push_back(std::move(card));
    }
    // Nodes that need no victim count too: a gang may take them beside one that does.
    if (!offer.cards.empty()) offers.push_back(std::move(offer));
  }
  return offers;
}

bool PreemptionStage::StaysWithinShare(const JobEntry& entry, const scheduler::Placement& placement,
                                       const std::vector<scheduler::NodeView>& views, bool from_others,
                                       bool from_own) const {
  if (fair_share_ == nullptr) return false;
  CardHoldings plus;
  ForEachPlacedCard(placement, views,
                    [&](const DeviceRecord& device, int64_t milli) { plus[CardClassOf(device)] += milli; });
  const pb::JobSpec& spec = entry.job().spec();
  if (from_others && fair_share_->HeldShare(spec.group(), plus) > 1 + kShareSlack) return false;
  return !from_own || fair_share_->UserHeldShare(spec.group(), spec.user(), plus) <= 1 + kShareSlack;
}

bool PreemptionStage::TryPreempt(JobEntry& entry, const scheduler::PlacementRequest& request,
                                 const std::vector<scheduler::NodeView>& views, const ViewsWithout& views_without,
                                 absl::Time now) {
  // A job across vendors waits for its cards (victims are chosen for one shape of node; its groups
  // have several): it may still be a victim, whole.
  if (mode_ == PreemptionMode::kOff || request.devices_per_node < 1 || request.Grouped() ||
      holds_.Waiting(entry.job().id())) {
    return false;
  }
  if (!candidates_) GatherCandidates(now);
  std::map<std::string, const PreemptibleJob*> stoppable;
  std::map<std::string, std::string> why;
  ShareMemo shares;
  for (auto& [id, c] : *candidates_) {
    if (auto reason = MayStop(entry, c, shares)) {
      stoppable[id] = &c.job;
      why[id] = *std::move(reason);
    }
  }
  if (stoppable.empty()) return false;
  const std::vector<NodeOffer> offers = Offers(request, views, stoppable);
  std::vector<scheduler::NodeView> placed_on;  // the views of the last placement that fitted
  auto fits = [&](const std::set<std::string>& victims) -> absl::StatusOr<scheduler::Placement> {
    std::vector<scheduler::NodeView> trial = views_without(ClaimsOf(victims));
    auto placement = policy_.Place(request, trial);
    if (placement.ok()) placed_on = std::move(trial);  // the last fit is the choice (see ChooseVictims)
    return placement;
  };
  std::optional<PreemptionChoice> choice = ChooseVictims(VictimRequestOf(request), offers, fits);
  if (!choice) return false;
  // Victims of the same priority are reclaimed: from other groups, or within the job's own.
  bool from_others = false, from_own = false;
  for (const PreemptibleJob* v : choice->victims) {
    const Candidate& c = candidates_->at(v->id);
    if (c.priority < entry.job().spec().priority()) continue;
    (c.group == entry.job().spec().group() ? from_own : from_others) = true;
  }
  if ((from_others || from_own) && !StaysWithinShare(entry, choice->placement, placed_on, from_others, from_own)) {
    return false;
  }

  return StopVictims(entry, *choice, why, /*defragmentation=*/false, now);
}

bool PreemptionStage::StopVictims(JobEntry& entry, const PreemptionChoice& choice,
                                  const std::map<std::string, std::string>& why, bool defragmentation, absl::Time now) {
  std::vector<std::pair<std::string, JobGen>> claims;
  std::vector<std::string> stopped;
  std::vector<std::string> victim_ids;
  for (const PreemptibleJob* victim : choice.victims) victim_ids.push_back(victim->id);
  for (const std::string& id : victim_ids) {
    Candidate& c = candidates_->at(id);
    pb::Preemption preemption;
    preemption.set_by_job(entry.job().id());
    preemption.set_reason(why.at(id));
    preemption.set_card_hours_lost(c.job.lost_card_seconds / 3600);
    preemption.set_defragmentation(defragmentation);
    // A refused store write stops nothing: the job stays a candidate for the next pass.
    if (!reconciler_.Preempt(*c.entry, std::move(preemption)).ok()) continue;
    claims.insert(claims.end(), c.claims.begin(), c.claims.end());
    stopped.push_back(absl::StrCat(id, " (", why.at(id), ")"));
    candidates_->erase(id);
  }
  if (stopped.empty()) return false;
  holds_.HoldFor(entry.job().id(), choice.placement, std::move(claims),
                 defragmentation ? std::optional(now) : std::nullopt);

  std::vector<std::string> where;
  for (const auto& assignment : choice.placement.nodes) where.push_back(assignment.node);
  const std::string message = absl::StrCat(defragmentation ? "moving " : "preempting ", absl::StrJoin(stopped, ", "),
                                           " for room on ", absl::StrJoin(where, ","), "; waiting for them to stop");
  pb::PendingReason pending;
  pending.set_preempting(absl::StrJoin(victim_ids, ","));
  jobs_.SayWhyWaiting(entry, "Unschedulable", message, std::move(pending),
                      defragmentation ? "Defragmenting" : "Preempting");
  return true;
}

std::map<std::string, const PreemptibleJob*> PreemptionStage::Movable(int priority, absl::Time not_moved_since,
                                                                      absl::Time now) {
  if (!candidates_) GatherCandidates(now);
  std::map<std::string, const PreemptibleJob*> movable;
  for (auto& [id, c] : *candidates_) {
    const pb::Job& job = c.entry->job();
    if (!job.spec().movable() || c.priority > priority) continue;
    const pb::Preemption& last = job.last_preemption();
    if (last.defragmentation() && FromProtoTime(last.at()) > not_moved_since) continue;  // moved lately
    movable[id] = &c.job;
  }
  return movable;
}

std::vector<std::pair<std::string, JobGen>> PreemptionStage::ClaimsOf(const std::set<std::string>& victims) const {
  std::vector<std::pair<std::string, JobGen>> claims;
  for (const auto& id : victims) {
    const auto& of = candidates_->at(id).claims;
    claims.insert(claims.end(), of.begin(), of.end());
  }
  return claims;
}

}  // namespace hetpool::daemon
