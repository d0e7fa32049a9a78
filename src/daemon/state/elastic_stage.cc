#include "src/daemon/state/elastic_stage.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/common/convert.h"
#include "src/daemon/sharing/preemption.h"
#include "src/daemon/state/job_request.h"

namespace hetpool::daemon {

ElasticStage::ElasticStage(JobTable& jobs, NodeRegistry& nodes, AgentReconciler& reconciler,
                           scheduler::PlacementPolicy& policy, PreemptionStage& holds, absl::Duration grow_after)
    : jobs_(jobs), nodes_(nodes), reconciler_(reconciler), policy_(policy), holds_(holds), grow_after_(grow_after) {}

std::map<std::string, ElasticStage::Running>& ElasticStage::RunningElastic() {
  if (running_) return *running_;
  std::map<std::string, Running>& running = running_.emplace();
  if (jobs_.live_elastic() == 0) return running;  // nothing to find in every node's claims
  const std::set<std::string> stopping =
      ForEachKeptClaim(nodes_, [&](const std::string& name, const NodeEntry&, const JobGen& key, const Claim& claim) {
        JobEntry* entry = jobs_.Find(key.first);
        // RUNNING only: a generation still starting has done nothing a resize would keep.
        if (entry == nullptr || entry->job().generation() != key.second ||
            entry->job().state() != pb::JOB_STATE_RUNNING || !entry->job().spec().has_elastic_nnodes()) {
          return;
        }
        Running& r = running[key.first];
        r.entry = entry;
        r.cards += static_cast<double>(claim.device_ids.size()) * claim.device_milli / 1000;
        r.claims.emplace_back(name, key);
      });
  for (auto it = running.begin(); it != running.end();) {
    const pb::Job& job = it->second.entry->job();
    // A node that has exited (its ranks done) means the job is finishing, not one to resize:
    // its claim is gone, so its size is the placement's, not the claims'.
    const bool finishing = std::any_of(job.placement().begin(), job.placement().end(),
                                       [](const pb::NodePlacement& p) { return p.exited(); });
    if (finishing || stopping.contains(it->first) || holds_.Waiting(it->first)) {
      it = running.erase(it);
      continue;
    }
    it->second.nodes = job.placement_size();
    ++it;
  }
  return running;
}

bool ElasticStage::StillRunning(const Running& r) {
  const pb::Job& job = r.entry->job();
  return job.state() == pb::JOB_STATE_RUNNING && !r.claims.empty() &&
         job.generation() == r.claims.front().second.second;
}

std::optional<std::pair<int, scheduler::Placement>> ElasticStage::LargestFit(
    scheduler::PlacementRequest request, int high, int low, const std::vector<scheduler::NodeView>& views) const {
  for (int n = high; n >= low; --n) {
    request.nnodes = n;
    auto placement = policy_.Place(request, views);
    if (placement.ok()) return std::make_pair(n, *std::move(placement));
  }
  return std::nullopt;
}

double ElasticStage::LostCardHours(const Running& job, absl::Time now) const {
  const pb::Job& j = job.entry->job();
  return LostCardSeconds(job.cards, FromProtoTime(j.started_at()), FromProtoDuration(j.spec().checkpoint_interval()),
                         now) /
         3600;
}

bool ElasticStage::TryShrink(JobEntry& waiting, const scheduler::PlacementRequest& request,
                             const ViewsWithout& views_without, absl::Time now) {
  if (request.devices_per_node < 1 || request.Grouped() || holds_.Waiting(waiting.job().id())) return false;
  std::map<std::string, Running>& running = RunningElastic();
  // Lower priority first, then the one that loses the least work.
  std::vector<Running*> order;
  for (auto& [id, r] : running) {
    const pb::JobSpec& spec = r.entry->job().spec();
    if (id == waiting.job().id() || !StillRunning(r) || r.nodes <= spec.elastic_nnodes().min() ||
        spec.priority() > waiting.job().spec().priority()) {
      continue;
    }
    order.push_back(&r);
  }
  std::sort(order.begin(), order.end(), [&](const Running* a, const Running* b) {
    const int pa = a->entry->job().spec().priority(), pb = b->entry->job().spec().priority();
    if (pa != pb) return pa < pb;
    const double la = LostCardHours(*a, now), lb = LostCardHours(*b, now);
    if (la != lb) return la < lb;
    return a->entry->job().id() < b->entry->job().id();
  });
  for (Running* r : order) {
    std::vector<scheduler::NodeView> trial = views_without(r->claims);
    auto room = policy_.Place(request, trial);
    if (!room.ok()) continue;
    scheduler::TakeOnViews(request, *room, trial);
    const pb::JobSpec& spec = r->entry->job().spec();
    // Smaller than it is: no quota can refuse it.
    auto smaller = LargestFit(ToPlacementRequest(spec), r->nodes - 1, spec.elastic_nnodes().min(), trial);
    if (!smaller) continue;
    pb::Preemption resize;
    resize.set_by_job(waiting.job().id());
    resize.set_reason(absl::StrCat("job ", waiting.job().id(), " of priority ", waiting.job().spec().priority(),
                                   " waits for its cards"));
    resize.set_from_nodes(r->nodes);
    resize.set_to_nodes(smaller->first);
    resize.set_card_hours_lost(LostCardHours(*r, now));
    const std::string elastic_id = r->entry->job().id();
    const int from = r->nodes;
    // A refused store write stops nothing: the job is tried again in the next pass.
    if (!reconciler_.Resize(*r->entry, std::move(resize)).ok()) return false;
    holds_.HoldFor(waiting.job().id(), *room, r->claims);
    holds_.HoldFor(elastic_id, smaller->second, r->claims);
    running.erase(elastic_id);  // r dangles from here
    holds_.Forget(elastic_id);  // no longer a victim the preemption stage gathered

    std::vector<std::string> where;
    for (const auto& assignment : room->nodes) where.push_back(assignment.node);
    const std::string message =
        absl::StrCat("shrinking elastic job ", elastic_id, " from ", from, " to ", smaller->first,
                     " nodes for room on ", absl::StrJoin(where, ","), "; waiting for it to stop");
    pb::PendingReason pending;
    pending.set_preempting(elastic_id);
    jobs_.SayWhyWaiting(waiting, "Unschedulable", message, std::move(pending), "Shrinking");
    return true;
  }
  return false;
}

bool ElasticStage::TryGrow(const RequestFor& request_for, const ViewsWithout& views_without, absl::Time now) {
  next_grow_check_ = absl::InfiniteFuture();
  std::map<std::string, Running>& running = RunningElastic();
  std::vector<Running*> due;
  for (auto& [id, r] : running) {
    const pb::Job& job = r.entry->job();
    if (!StillRunning(r) || r.nodes >= job.spec().elastic_nnodes().max()) continue;
    const absl::Time at = FromProtoTime(job.started_at()) + grow_after_;
    if (at > now) {
      next_grow_check_ = std::min(next_grow_check_, at);
      continue;
    }
    due.push_back(&r);
  }
  // Higher priority first, then the oldest submission.
  std::sort(due.begin(), due.end(), [](const Running* a, const Running* b) {
    const pb::Job &ja = a->entry->job(), &jb = b->entry->job();
    if (ja.spec().priority() != jb.spec().priority()) return ja.spec().priority() > jb.spec().priority();
    return ja.submit_seq() < jb.submit_seq();
  });
  for (Running* r : due) {
    const pb::JobSpec& spec = r->entry->job().spec();
    auto larger =
        LargestFit(request_for(*r->entry), spec.elastic_nnodes().max(), r->nodes + 1, views_without(r->claims));
    if (!larger) continue;
    pb::Preemption resize;
    resize.set_reason(absl::StrCat(larger->first - r->nodes, " more node(s) free and nothing waits for them"));
    resize.set_from_nodes(r->nodes);
    resize.set_to_nodes(larger->first);
    resize.set_card_hours_lost(LostCardHours(*r, now));
    const std::string id = r->entry->job().id();
    if (!reconciler_.Resize(*r->entry, std::move(resize)).ok()) return false;
    holds_.HoldFor(id, larger->second, r->claims);
    running.erase(id);
    holds_.Forget(id);
    return true;
  }
  return false;
}

}  // namespace hetpool::daemon
