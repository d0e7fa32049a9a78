// Preemption's victim choice: which running jobs to stop so that a waiting job fits, losing the
// least work. Thread-free and free of the daemon's tables: the scheduling cycle (its preemption
// stage, scheduling_cycle.h) describes the pool as offers (which cards qualify for the waiting
// job, which are free, which preemptible jobs hold the others) and answers "does it fit without
// these jobs?" by asking the placement policy itself, so nothing is stopped for a job that would
// still not fit.
//
// The choice, like the Kubernetes scheduler's preemption but for whole gangs:
//  1. per node, the cheapest victims that leave enough qualifying cards of one vendor (whole
//     cards: the cheapest cards to free, each card's price being the work its holders lose;
//     a fractional share: the cheapest device to free enough of), then, while the node's host
//     CPU or memory is still short, the cheapest of the other jobs holding some;
//  2. the job's nnodes cheapest nodes (nodes needing no victim first), their victims together;
//  3. the policy places the job on the pool without them (every filter, gangs and racks
//     included; a move also needs each moved job placed elsewhere), or the next cheapest nodes
//     are tried (a window sliding down the costs, 8 sets at most), or nothing happens;
//  4. reprieve: each victim, the most work first, is spared when the job still fits without
//     stopping it.
// A victim is a whole job: every node of its gang stops. Jobs larger than the waiting one (more
// cards) are stopped only when no choice among the others exists: a gang that just started
// loses little work, but freeing eight cards for one would send it back to wait for eight.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hetpool/vendor.h"
#include "scheduler/placement_policy.h"

namespace hetpool::daemon {

// A running job that may be stopped for the waiting one.
struct PreemptibleJob {
  std::string id;
  double lost_card_seconds = 0;  // card-seconds run since its last checkpoint
  absl::Time started;            // the younger of two equally cheap victims goes first
  double cards = 0;              // it holds in all (fractional shares by their fraction)
};

// Cheaper victims first: least work lost, then the youngest, then by id (a stable order).
bool CheaperVictim(const PreemptibleJob& a, const PreemptibleJob& b);

// One card that could serve the waiting job (it qualifies, is healthy and is not held for
// another), as preemption sees it.
struct CardOffer {
  std::string device_id;
  Vendor vendor = Vendor::kCpu;
  bool free = false;          // nothing holds it
  int32_t milli_free = 1000;  // share left for fractional jobs
  // The jobs holding it and the share each holds; null job: one that may not be preempted
  // (then the card cannot be freed).
  std::vector<std::pair<const PreemptibleJob*, int32_t>> holders;
};

// Host CPU and memory a preemptible job holds on a node.
struct HostHolder {
  const PreemptibleJob* job = nullptr;
  int64_t cpu_milli = 0;
  uint64_t memory_mib = 0;
};

struct NodeOffer {
  std::string node;
  std::vector<CardOffer> cards;
  // The host left free (a node that reports no total is not limited: the limits are off).
  bool host_limited = false;
  int64_t cpu_milli_free = 0;
  uint64_t memory_free_mib = 0;
  std::vector<HostHolder> host_holders;
};

struct VictimRequest {
  double Cards() const {
    return nnodes * devices_per_node * (device_milli > 0 && device_milli < 1000 ? device_milli / 1000.0 : 1.0);
  }
  int nnodes = 1;
  int devices_per_node = 1;
  int32_t device_milli = 1000;  // < 1000: a share of one card per node
  int64_t cpu_milli = 0;        // host CPU per node
  uint64_t memory_mib = 0;      // host memory per node
  // > 0: only sets of at most this many victims (defragmentation: the moves it may still make).
  int max_victims = 0;
};

// Whether the waiting job fits once these jobs' claims are gone, and where.
using FitsWithout = std::function<absl::StatusOr<scheduler::Placement>(const std::set<std::string>& victims)>;

struct PreemptionChoice {
  std::vector<const PreemptibleJob*> victims;  // cheapest first
  scheduler::Placement placement;              // where the waiting job goes once they stopped
};

// The victims for one waiting job, or nullopt when no set of preemptible jobs makes it fit.
std::optional<PreemptionChoice> ChooseVictims(const VictimRequest& request, const std::vector<NodeOffer>& offers,
                                              const FitsWithout& fits);

// Work a preemption throws away: the cards held times the time run since the last checkpoint
// (every `checkpoint_interval` since the start; none: since the start).
double LostCardSeconds(double cards, absl::Time started, absl::Duration checkpoint_interval, absl::Time now);

}  // namespace hetpool::daemon
