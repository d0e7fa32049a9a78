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

VictimRequest VictimRequestOf(const scheduler::PlacementRequest& request) {
  return {request.nnodes, request.devices_per_node, request.device_milli, request.cpu_milli, request.host_memory_mib};
}

}  // namespace

absl::StatusOr<PreemptionMode> ParsePreemptionMode(const std::string& text) {
  if (text == "off") return PreemptionMode::kOff;
  if (text == "priority") return PreemptionMode::kPriority;
  if (text == "fair-share") return PreemptionMode::kFairShare;
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not one of off, priority, fair-share"));
}

PreemptionStage::PreemptionStage(JobTable& jobs, NodeRegistry& nodes, AgentReconciler& reconciler,
                                 scheduler::PlacementPolicy& policy, PreemptionMode mode,
                                 const FairShareLedger* fair_share, DefragOptions defrag)
    : jobs_(jobs),
      nodes_(nodes),
      reconciler_(reconciler),
      policy_(policy),
      mode_(mode),
      fair_share_(fair_share),
      defrag_(defrag),
      move_pacing_(defrag.moves_per_hour / 3600.0,
                   defrag.move_burst > 0 ? std::min(defrag.move_burst, defrag.moves_per_hour) : defrag.moves_per_hour) {}

void PreemptionStage::GatherCandidates(absl::Time now) {
  candidates_.emplace();
  // The pass's time as a placement stores it (whole nanoseconds): a clock with finer ticks (the
  // trace replay's) would otherwise see a job placed by this very pass as placed before it.
  const absl::Time this_pass = FromProtoTime(ToProtoTime(now));
  // Claims tell which jobs run where; a job any of whose claims is being stopped is not one.
  const std::set<std::string> stopping =
      ForEachKeptClaim(nodes_, [&](const std::string& name, const NodeEntry& node, const JobGen& key, const Claim& claim) {
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
    c.bought_by_moves = job.has_moved_for_at() && now - FromProtoTime(job.moved_for_at()) < defrag_.window;
    // Work since the generation started running (a scheduled one that has not started loses none).
    const double cards = static_cast<double>(CardsNeeded(job.spec())) / 1000;
    c.job.cards = cards;
    c.job.started = job.state() == pb::JOB_STATE_RUNNING ? FromProtoTime(job.started_at()) : now;
    c.job.lost_card_seconds =
        LostCardSeconds(cards, c.job.started, FromProtoDuration(job.spec().checkpoint_interval()), now);
    ++it;
  }
}

std::optional<std::string> PreemptionStage::MayStop(const JobEntry& entry, const Candidate& c, ShareMemo& shares) const {
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
      it->second = card_class == CardClass{} ? fair_share_->HeldShare(group) : fair_share_->ClassShare(group, card_class);
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
  ForEachPlacedCard(placement, views, [&](const DeviceRecord& device, int64_t milli) { plus[CardClassOf(device)] += milli; });
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
      holds_.contains(entry.job().id())) {
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
                                  const std::map<std::string, std::string>& why, bool defragmentation,
                                  absl::Time now) {
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
  HoldFor(entry.job().id(), choice.placement, std::move(claims), defragmentation ? std::optional(now) : std::nullopt);

  std::vector<std::string> where;
  for (const auto& assignment : choice.placement.nodes) where.push_back(assignment.node);
  const std::string message = absl::StrCat(defragmentation ? "moving " : "preempting ", absl::StrJoin(stopped, ", "),
                                           " for room on ", absl::StrJoin(where, ","), "; waiting for them to stop");
  pb::PendingReason pending;
  pending.set_preempting(absl::StrJoin(victim_ids, ","));
  jobs_.SayWhyWaiting(entry, "Unschedulable", message, std::move(pending), defragmentation ? "Defragmenting" : "Preempting");
  return true;
}

bool PreemptionStage::MayMoveFor(const JobEntry& entry, absl::Time now) const {
  return defrag_.after > absl::ZeroDuration() && !holds_.contains(entry.job().id()) &&
         now - FromProtoTime(entry.job().created_at()) >= defrag_.after;
}

PreemptionStage::MoveOutcome PreemptionStage::TryMove(JobEntry& entry, const scheduler::PlacementRequest& request,
                                                           const std::vector<scheduler::NodeView>& views,
                                                           const ViewsWithout& views_without, absl::Time now) {
  if (!MayMoveFor(entry, now) || request.devices_per_node < 1 || request.Grouped()) return MoveOutcome::kNone;
  const absl::Duration waited = now - FromProtoTime(entry.job().created_at());
  const bool moved_may_wait = defrag_.requeue_after > absl::ZeroDuration() && waited >= defrag_.requeue_after;
  while (!moves_.empty() && moves_.front() <= now - absl::Hours(1)) moves_.pop_front();
  const int budget = defrag_.moves_per_hour - static_cast<int>(moves_.size());
  // A set of moves larger than the pacing bucket holds may go once it holds the burst, and
  // leaves it in debt (the next set waits the longer).
  const double tokens = move_pacing_.Refill(now);
  if (budget <= 0 || tokens < 1) return MoveOutcome::kNone;
  if (!candidates_) GatherCandidates(now);
  const std::string reason = absl::StrCat(
      "defragmentation: job ", entry.job().id(), " waited ",
      absl::FormatDuration(absl::Trunc(now - FromProtoTime(entry.job().created_at()), absl::Seconds(1))),
      " with enough cards free, scattered");
  std::map<std::string, const PreemptibleJob*> movable;
  std::map<std::string, std::string> why;
  for (auto& [id, c] : *candidates_) {
    const pb::Job& job = c.entry->job();
    if (!job.spec().movable() || c.priority > entry.job().spec().priority()) continue;
    const pb::Preemption& last = job.last_preemption();
    if (last.defragmentation() && FromProtoTime(last.at()) > now - defrag_.window) continue;  // moved lately
    movable[id] = &c.job;
    why[id] = reason;
  }
  if (movable.empty()) return MoveOutcome::kNone;
  const std::vector<NodeOffer> offers = Offers(request, views, movable);
  // Fragmentation, not a full pool: the shares left on the qualifying cards add up to what the
  // job asks (partly used cards count: repacking their jobs frees whole ones).
  int64_t free_milli = 0;
  for (const auto& node : offers) {
    for (const auto& card : node.cards) free_milli += card.milli_free;
  }
  const int64_t share = request.Fractional() ? request.device_milli : 1000;
  if (free_milli < share * request.nnodes * request.devices_per_node) return MoveOutcome::kNone;
  // The job fits without the moved jobs, and then every moved job fits on what is left (`land`),
  // or, for a job past --defrag-requeue-after, the moved jobs may wait in the queue.
  auto choose = [&](const std::vector<NodeOffer>& from, bool land, int max_moves) {
    auto fits = [&](const std::set<std::string>& victims) -> absl::StatusOr<scheduler::Placement> {
      std::vector<scheduler::NodeView> trial = views_without(ClaimsOf(victims));
      auto placement = policy_.Place(request, trial);
      if (!placement.ok() || !land) return placement;
      scheduler::TakeOnViews(request, *placement, trial);
      for (const auto& id : victims) {
        const scheduler::PlacementRequest moved = ToPlacementRequest(candidates_->at(id).entry->job().spec());
        auto elsewhere = policy_.Place(moved, trial);
        if (!elsewhere.ok()) return absl::UnavailableError(absl::StrCat("job ", id, " would not fit elsewhere"));
        scheduler::TakeOnViews(moved, *elsewhere, trial);
      }
      return placement;
    };
    VictimRequest victims = VictimRequestOf(request);
    victims.max_victims = max_moves;
    return ChooseVictims(victims, from, fits);
  };
  // The moves allowed now: the hour's left, and what the pacing bucket holds (a set as large as
  // the burst may go once it holds the burst).
  const int allowed = tokens >= move_pacing_.burst() ? budget : std::min(budget, static_cast<int>(tokens));
  // The set that loses the least work; when it needs more moves than are allowed now, the
  // cheapest set that needs no more (many small jobs may hold a node that a few others also
  // free: the hour's moves then serve more jobs). None: over budget when a set the hour could
  // pay for exists.
  bool over_budget = false;
  auto choose_allowed = [&](const std::vector<NodeOffer>& from, bool land) -> std::optional<PreemptionChoice> {
    std::optional<PreemptionChoice> cheapest = choose(from, land, defrag_.moves_per_hour);
    if (!cheapest || static_cast<int>(cheapest->victims.size()) <= allowed) return cheapest;
    if (auto fewer = choose(from, land, allowed)) return fewer;
    over_budget = true;
    return std::nullopt;
  };
  std::optional<PreemptionChoice> choice = choose_allowed(offers, /*land=*/true);
  if (!choice && moved_may_wait) {
    // Only jobs smaller than the waiting one wait for it: they find room far sooner than it does
    // (moving a job for one of its own size only swaps who waits).
    const double cards = VictimRequestOf(request).Cards();
    std::map<std::string, const PreemptibleJob*> smaller;
    for (const auto& [id, job] : movable) {
      if (job->cards < cards) smaller[id] = job;
    }
    if (!smaller.empty()) {
      for (auto& [id, reason_text] : why) absl::StrAppend(&reason_text, "; it waits in the queue for its next place");
      choice = choose_allowed(Offers(request, views, smaller), /*land=*/false);
    }
  }
  if (!choice) return over_budget ? MoveOutcome::kOverBudget : MoveOutcome::kNone;
  const int needed = static_cast<int>(choice->victims.size());
  if (!StopVictims(entry, *choice, why, /*defragmentation=*/true, now)) return MoveOutcome::kNone;
  for (int i = 0; i < needed; ++i) moves_.push_back(now);
  move_pacing_.Take(needed);
  return MoveOutcome::kMoved;
}

std::vector<std::pair<std::string, JobGen>> PreemptionStage::ClaimsOf(const std::set<std::string>& victims) const {
  std::vector<std::pair<std::string, JobGen>> claims;
  for (const auto& id : victims) {
    const auto& of = candidates_->at(id).claims;
    claims.insert(claims.end(), of.begin(), of.end());
  }
  return claims;
}

std::vector<std::string> PreemptionStage::Preemptors() const {
  std::vector<std::pair<uint64_t, std::string>> ordered;
  for (const auto& [id, hold] : holds_) ordered.emplace_back(hold.seq, id);
  std::sort(ordered.begin(), ordered.end());
  std::vector<std::string> out;
  for (auto& [seq, id] : ordered) out.push_back(std::move(id));
  return out;
}

bool PreemptionStage::VictimsGone(const std::string& job_id) const {
  auto it = holds_.find(job_id);
  if (it == holds_.end()) return true;
  const Hold& hold = it->second;
  for (const auto& [name, key] : hold.claims) {
    const NodeEntry* node = nodes_.Find(name);
    if (node == nullptr) continue;
    if (node->claims.contains(key)) return false;
    // Restored after a restart: a node that has not registered again may still run them.
    if (node->session_id.empty() && jobs_.Now() < hold.nodes_until) return false;
  }
  return true;
}

pb::CardHold PreemptionStage::ToProto(const Hold& hold) {
  pb::CardHold out;
  out.set_seq(hold.seq);
  for (const auto& [node, devices] : hold.cards) {
    auto* cards = out.add_cards();
    cards->set_node(node);
    for (const auto& d : devices) cards->add_device_ids(d);
  }
  for (const auto& [node, key] : hold.claims) {
    auto* claim = out.add_waiting_for();
    claim->set_node(node);
    claim->set_job_id(key.first);
    claim->set_generation(key.second);
  }
  return out;
}

PreemptionStage::Hold PreemptionStage::FromProto(const pb::CardHold& stored) {
  Hold hold;
  hold.seq = stored.seq();
  for (const auto& cards : stored.cards()) hold.cards[cards.node()].insert(cards.device_ids().begin(), cards.device_ids().end());
  for (const auto& claim : stored.waiting_for()) hold.claims.push_back({claim.node(), {claim.job_id(), claim.generation()}});
  return hold;
}

void PreemptionStage::HoldFor(const std::string& job_id_ref, const scheduler::Placement& placement,
                              std::vector<std::pair<std::string, JobGen>> claims,
                              std::optional<absl::Time> moved_for_at) {
  const std::string job_id = job_id_ref;  // callers pass the job's own id, which the commit below replaces
  Hold hold;
  hold.seq = next_seq_++;
  for (const auto& assignment : placement.nodes) {
    hold.cards[assignment.node].insert(assignment.device_ids.begin(), assignment.device_ids.end());
  }
  hold.claims = std::move(claims);
  if (JobEntry* entry = jobs_.Find(job_id)) {
    pb::Job next = entry->job();
    *next.mutable_hold() = ToProto(hold);
    if (moved_for_at) *next.mutable_moved_for_at() = ToProtoTime(*moved_for_at);
    // Refused by the store, the hold still counts in this daemon; only a restart would forget it
    // (as every daemon did before holds were stored).
    if (absl::Status s = jobs_.Commit(*entry, std::move(next)); !s.ok()) {
      spdlog::warn("job {}: its hold on the cards of the jobs it stopped was not stored: {}", job_id, std::string(s.message()));
    }
  }
  holds_[job_id] = std::move(hold);
}

void PreemptionStage::Release(const std::string& job_id) {
  holds_.erase(job_id);
  JobEntry* entry = jobs_.Find(job_id);
  if (entry == nullptr || !entry->job().has_hold()) return;
  entry->mutable_job().clear_hold();
  jobs_.Touch(*entry);  // stored with its next change; a stale stored hold only waits on nothing
}

void PreemptionStage::RestoreHolds(absl::Time now, absl::Duration patience) {
  for (JobEntry* pending : jobs_.Pending(nullptr)) {
    JobEntry& entry = *pending;
    if (!entry.job().has_hold()) continue;
    const std::string& id = entry.job().id();
    Hold hold = FromProto(entry.job().hold());
    hold.nodes_until = now + patience;
    if (entry.job().pending().preempting().empty()) {  // said after the hold was stored: say it again
      std::set<std::string> victims;
      for (const auto& [node, key] : hold.claims) victims.insert(key.first);
      entry.mutable_job().mutable_pending()->set_preempting(absl::StrJoin(victims, ","));
    }
    next_seq_ = std::max(next_seq_, hold.seq + 1);
    holds_[id] = std::move(hold);
  }
}

HeldCards PreemptionStage::HeldForPreemptors(const std::string& except) const {
  HeldCards out;
  for (const auto& [id, hold] : holds_) {
    if (id == except) continue;
    for (const auto& [node, devices] : hold.cards) out[node].insert(devices.begin(), devices.end());
  }
  return out;
}

}  // namespace hetpool::daemon
