#include "src/daemon/state/defrag_stage.h"

#include "absl/strings/str_cat.h"
#include "src/common/convert.h"
#include "src/daemon/state/job_request.h"

namespace hetpool::daemon {

bool DefragStage::MayMoveFor(const JobEntry& entry, absl::Time now) const {
  return options_.after > absl::ZeroDuration() && !victims_.Waiting(entry.job().id()) &&
         now - FromProtoTime(entry.job().created_at()) >= options_.after;
}

std::optional<PreemptionChoice> DefragStage::Choose(const scheduler::PlacementRequest& request,
                                                    const PreemptionStage::ViewsWithout& views_without,
                                                    const std::vector<NodeOffer>& offers, bool land, int max_moves) {
  auto fits = [&](const std::set<std::string>& moved) -> absl::StatusOr<scheduler::Placement> {
    std::vector<scheduler::NodeView> trial = views_without(victims_.ClaimsOf(moved));
    auto placement = policy_.Place(request, trial);
    if (!placement.ok() || !land) return placement;
    scheduler::TakeOnViews(request, *placement, trial);
    for (const auto& id : moved) {
      const scheduler::PlacementRequest request_of_moved = ToPlacementRequest(victims_.SpecOf(id));
      auto elsewhere = policy_.Place(request_of_moved, trial);
      if (!elsewhere.ok()) return absl::UnavailableError(absl::StrCat("job ", id, " would not fit elsewhere"));
      scheduler::TakeOnViews(request_of_moved, *elsewhere, trial);
    }
    return placement;
  };
  VictimRequest wanted = VictimRequestOf(request);
  wanted.max_victims = max_moves;
  return ChooseVictims(wanted, offers, fits);
}

DefragStage::MoveOutcome DefragStage::TryMove(JobEntry& entry, const scheduler::PlacementRequest& request,
                                              const std::vector<scheduler::NodeView>& views,
                                              const PreemptionStage::ViewsWithout& views_without, absl::Time now) {
  if (!MayMoveFor(entry, now) || request.devices_per_node < 1 || request.Grouped()) return MoveOutcome::kNone;
  const absl::Duration waited = now - FromProtoTime(entry.job().created_at());
  const bool moved_may_wait = options_.requeue_after > absl::ZeroDuration() && waited >= options_.requeue_after;
  const MovePacing::Allowance allowance = pacing_.Now(now);
  if (allowance.now <= 0) return MoveOutcome::kNone;
  std::map<std::string, const PreemptibleJob*> movable =
      victims_.Movable(entry.job().spec().priority(), now - options_.window, now);
  if (movable.empty()) return MoveOutcome::kNone;
  const std::string reason =
      absl::StrCat("defragmentation: job ", entry.job().id(), " waited ",
                   absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1))), " with enough cards free, scattered");
  std::map<std::string, std::string> why;
  for (const auto& [id, job] : movable) why[id] = reason;
  const std::vector<NodeOffer> offers = victims_.Offers(request, views, movable);
  // Fragmentation, not a full pool: the shares left on the qualifying cards add up to what the
  // job asks (partly used cards count: repacking their jobs frees whole ones).
  int64_t free_milli = 0;
  for (const auto& node : offers) {
    for (const auto& card : node.cards) free_milli += card.milli_free;
  }
  const int64_t share = request.Fractional() ? request.device_milli : 1000;
  if (free_milli < share * request.nnodes * request.devices_per_node) return MoveOutcome::kNone;
  // The set that loses the least work; when it needs more moves than may go now, the cheapest
  // set that needs no more (many small jobs may hold a node that a few others also free: the
  // hour's moves then serve more jobs). None: over budget when a set the hour could pay for exists.
  bool over_budget = false;
  auto choose_allowed = [&](const std::vector<NodeOffer>& from, bool land) -> std::optional<PreemptionChoice> {
    std::optional<PreemptionChoice> cheapest = Choose(request, views_without, from, land, options_.moves_per_hour);
    if (!cheapest || static_cast<int>(cheapest->victims.size()) <= allowance.now) return cheapest;
    if (auto fewer = Choose(request, views_without, from, land, allowance.now)) return fewer;
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
      choice = choose_allowed(victims_.Offers(request, views, smaller), /*land=*/false);
    }
  }
  if (!choice) return over_budget ? MoveOutcome::kOverBudget : MoveOutcome::kNone;
  const int needed = static_cast<int>(choice->victims.size());
  if (!victims_.StopVictims(entry, *choice, why, /*defragmentation=*/true, now)) return MoveOutcome::kNone;
  pacing_.Took(needed, now);
  return MoveOutcome::kMoved;
}

}  // namespace hetpool::daemon
