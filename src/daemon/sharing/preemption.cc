#include "src/daemon/sharing/preemption.h"

#include <algorithm>
#include <limits>

namespace hetpool::daemon {
namespace {

// How many sets of nodes, cheapest first, are tried before giving up.
constexpr size_t kNodeSetTries = 8;

// What one node needs stopped to take its part of the job.
struct NodeCost {
  const NodeOffer* node = nullptr;
  double lost = 0;
  std::set<const PreemptibleJob*> victims;
};

double Lost(const std::set<const PreemptibleJob*>& victims) {
  double sum = 0;
  for (const PreemptibleJob* v : victims) sum += v->lost_card_seconds;
  return sum;
}

bool Freed(const CardOffer& card, const std::set<const PreemptibleJob*>& victims) {
  if (card.free) return true;
  if (card.holders.empty()) return false;  // held by nothing preemption knows of
  return std::all_of(card.holders.begin(), card.holders.end(),
                     [&](const auto& holder) { return holder.first != nullptr && victims.contains(holder.first); });
}

// Whole cards: free `need` cards of one vendor, each step freeing the card whose holders not yet
// chosen lose the least.
std::optional<NodeCost> WholeCards(const NodeOffer& node, const std::vector<const CardOffer*>& cards, int need) {
  NodeCost cost{&node, 0, {}};
  auto freed = [&] {
    return static_cast<int>(
        std::count_if(cards.begin(), cards.end(), [&](const CardOffer* c) { return Freed(*c, cost.victims); }));
  };
  while (freed() < need) {
    const CardOffer* best = nullptr;
    double best_added = std::numeric_limits<double>::infinity();
    for (const CardOffer* card : cards) {
      if (Freed(*card, cost.victims) || card->holders.empty()) continue;
      double added = 0;
      bool stoppable = true;
      for (const auto& [job, milli] : card->holders) {
        if (job == nullptr)
          stoppable = false;
        else if (!cost.victims.contains(job))
          added += job->lost_card_seconds;
      }
      if (!stoppable) continue;
      if (added < best_added) {
        best = card;
        best_added = added;
      }
    }
    if (best == nullptr) return std::nullopt;
    for (const auto& [job, milli] : best->holders) cost.victims.insert(job);
  }
  cost.lost = Lost(cost.victims);
  return cost;
}

// A share of one card: the card that is cheapest to free enough of.
std::optional<NodeCost> FractionalShare(const NodeOffer& node, const std::vector<const CardOffer*>& cards,
                                        int32_t milli) {
  std::optional<NodeCost> best;
  for (const CardOffer* card : cards) {
    NodeCost cost{&node, 0, {}};
    int32_t left = card->milli_free;
    std::vector<std::pair<const PreemptibleJob*, int32_t>> holders = card->holders;
    std::sort(holders.begin(), holders.end(), [](const auto& a, const auto& b) {
      if (a.first == nullptr || b.first == nullptr) return a.first != nullptr;  // unstoppable last
      return CheaperVictim(*a.first, *b.first);
    });
    for (const auto& [job, held] : holders) {
      if (left >= milli || job == nullptr) break;
      cost.victims.insert(job);
      left += held;
    }
    if (left < milli) continue;
    cost.lost = Lost(cost.victims);
    if (!best || cost.lost < best->lost) best = std::move(cost);
  }
  return best;
}

// Adds the cheapest jobs holding host CPU or memory until the node has what the job asks.
std::optional<NodeCost> WithHost(NodeCost cost, const VictimRequest& request) {
  const NodeOffer& node = *cost.node;
  if (!node.host_limited) return cost;
  std::vector<const HostHolder*> holders;
  for (const auto& h : node.host_holders) holders.push_back(&h);
  std::sort(holders.begin(), holders.end(),
            [](const HostHolder* a, const HostHolder* b) { return CheaperVictim(*a->job, *b->job); });
  auto short_of = [&](int64_t* cpu, int64_t* memory) {
    *cpu = node.cpu_milli_free;
    *memory = static_cast<int64_t>(node.memory_free_mib);
    for (const auto& h : node.host_holders) {
      if (!cost.victims.contains(h.job)) continue;
      *cpu += h.cpu_milli;
      *memory += static_cast<int64_t>(h.memory_mib);
    }
    return *cpu < request.cpu_milli || *memory < static_cast<int64_t>(request.memory_mib);
  };
  int64_t cpu = 0, memory = 0;
  for (const HostHolder* h : holders) {
    if (!short_of(&cpu, &memory)) break;
    const bool helps = (cpu < request.cpu_milli && h->cpu_milli > 0) ||
                       (memory < static_cast<int64_t>(request.memory_mib) && h->memory_mib > 0);
    if (helps) cost.victims.insert(h->job);
  }
  if (short_of(&cpu, &memory)) return std::nullopt;
  cost.lost = Lost(cost.victims);
  return cost;
}

// The node's cheapest way to hold its part of the job, over its vendors.
std::optional<NodeCost> CheapestOn(const NodeOffer& node, const VictimRequest& request) {
  std::map<Vendor, std::vector<const CardOffer*>> by_vendor;
  for (const auto& card : node.cards) by_vendor[card.vendor].push_back(&card);
  std::optional<NodeCost> best;
  for (const auto& [vendor, cards] : by_vendor) {
    std::optional<NodeCost> cost = request.device_milli > 0 && request.device_milli < 1000
                                       ? FractionalShare(node, cards, request.device_milli)
                                       : WholeCards(node, cards, request.devices_per_node);
    if (cost) cost = WithHost(*std::move(cost), request);
    if (cost && (!best || cost->lost < best->lost ||
                 (cost->lost == best->lost && cost->victims.size() < best->victims.size()))) {
      best = std::move(cost);
    }
  }
  return best;
}

std::set<std::string> Ids(const std::vector<const PreemptibleJob*>& victims) {
  std::set<std::string> ids;
  for (const PreemptibleJob* v : victims) ids.insert(v->id);
  return ids;
}

// The offers with jobs larger than `max_cards` made unstoppable.
std::vector<NodeOffer> WithoutLarger(std::vector<NodeOffer> offers, double max_cards) {
  auto larger = [max_cards](const PreemptibleJob* job) { return job != nullptr && job->cards > max_cards; };
  for (auto& node : offers) {
    for (auto& card : node.cards) {
      for (auto& holder : card.holders) {
        if (larger(holder.first)) holder.first = nullptr;
      }
    }
    std::erase_if(node.host_holders, [&](const HostHolder& h) { return larger(h.job); });
  }
  return offers;
}

// The choice among the offers' stoppable jobs (steps 1-4 above).
std::optional<PreemptionChoice> ChooseAmong(const VictimRequest& request, const std::vector<NodeOffer>& offers,
                                            const FitsWithout& fits) {
  std::vector<NodeCost> costs;
  for (const auto& node : offers) {
    if (auto cost = CheapestOn(node, request)) costs.push_back(*std::move(cost));
  }
  const auto too_many = [&](size_t victims) {
    return request.max_victims > 0 && victims > static_cast<size_t>(request.max_victims);
  };
  std::erase_if(costs, [&](const NodeCost& cost) { return too_many(cost.victims.size()); });
  if (static_cast<int>(costs.size()) < request.nnodes) return std::nullopt;
  std::sort(costs.begin(), costs.end(), [](const NodeCost& a, const NodeCost& b) {
    if (a.lost != b.lost) return a.lost < b.lost;
    if (a.victims.size() != b.victims.size()) return a.victims.size() < b.victims.size();
    return a.node->node < b.node->node;
  });
  // The nnodes cheapest nodes first, then the next ones (a window sliding down the costs): the
  // cheapest set may not do (a victim that must fit elsewhere does not, a link the job needs is
  // not there). A bounded number of tries: each is a placement of the whole pool.
  std::optional<PreemptionChoice> choice;
  const size_t nnodes = static_cast<size_t>(request.nnodes);
  for (size_t first = 0; !choice && first + nnodes <= costs.size() && first < kNodeSetTries; ++first) {
    std::set<const PreemptibleJob*> chosen;
    for (size_t i = first; i < first + nnodes; ++i) chosen.insert(costs[i].victims.begin(), costs[i].victims.end());
    if (chosen.empty()) return std::nullopt;  // it would fit as it is: something else holds it back
    if (too_many(chosen.size())) continue;
    std::vector<const PreemptibleJob*> victims(chosen.begin(), chosen.end());
    std::sort(victims.begin(), victims.end(),
              [](const PreemptibleJob* a, const PreemptibleJob* b) { return CheaperVictim(*a, *b); });
    if (auto placement = fits(Ids(victims)); placement.ok())
      choice = PreemptionChoice{std::move(victims), *std::move(placement)};
  }
  if (!choice) return std::nullopt;  // never stop anything for a job that would still wait
  // Reprieve, the most work first: spare every victim the job can do without.
  for (size_t i = choice->victims.size(); i-- > 0;) {
    std::vector<const PreemptibleJob*> without = choice->victims;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (without.empty()) continue;
    if (auto spared = fits(Ids(without)); spared.ok()) {
      choice->victims = std::move(without);
      choice->placement = *std::move(spared);
    }
  }
  return choice;
}

}  // namespace

bool CheaperVictim(const PreemptibleJob& a, const PreemptibleJob& b) {
  if (a.lost_card_seconds != b.lost_card_seconds) return a.lost_card_seconds < b.lost_card_seconds;
  if (a.started != b.started) return a.started > b.started;
  return a.id < b.id;
}

std::optional<PreemptionChoice> ChooseVictims(const VictimRequest& request, const std::vector<NodeOffer>& offers,
                                              const FitsWithout& fits) {
  if (request.nnodes < 1 || request.devices_per_node < 1) return std::nullopt;
  if (auto choice = ChooseAmong(request, WithoutLarger(offers, request.Cards()), fits)) return choice;
  return ChooseAmong(request, offers, fits);
}

double LostCardSeconds(double cards, absl::Time started, absl::Duration checkpoint_interval, absl::Time now) {
  if (now <= started || cards <= 0) return 0;
  absl::Duration since = now - started;
  if (checkpoint_interval > absl::ZeroDuration()) since = since % checkpoint_interval;
  return cards * absl::ToDoubleSeconds(since);
}

}  // namespace hetpool::daemon
