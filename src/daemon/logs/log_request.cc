#include "src/daemon/logs/log_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/common/names.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {

namespace {

// The global rank of each local rank on placement `p`: as its agent saw them, or, for a job on
// one node (whose ranks are its local ranks), known without the agent having seen them: a job
// that ends within a second may end before they are seen.
std::vector<int> RanksOf(const hetpool::v1::Job& job, const hetpool::v1::NodePlacement& p) {
  if (p.global_ranks_size() > 0 || job.placement_size() != 1 || job.spec().groups_size() > 0) {
    return {p.global_ranks().begin(), p.global_ranks().end()};
  }
  std::vector<int> ranks(static_cast<size_t>(std::max(job.spec().procs_per_node(), 0)));
  for (size_t local = 0; local < ranks.size(); ++local) ranks[local] = static_cast<int>(local);
  return ranks;
}

}  // namespace

absl::StatusOr<std::vector<LogStream>> LogStreamsFor(const hetpool::v1::Job& job,
                                                     const hetpool::v1::GetJobLogsRequest& req, uint64_t generation) {
  std::vector<LogStream> streams;
  if (req.has_rank()) {
    const int64_t world = TotalRanks(job.spec());
    if (req.rank() < 0 || req.rank() >= world) {
      return absl::InvalidArgumentError(absl::StrCat("rank: must be in [0, ", world, ")"));
    }
    for (const auto& p : job.placement()) {
      const std::vector<int> ranks = RanksOf(job, p);
      for (size_t local = 0; local < ranks.size(); ++local) {
        if (ranks[local] == req.rank()) streams.push_back({p.node(), static_cast<int>(local)});
      }
    }
    // Until the workers are up (and report their ranks) no node is known to hold the rank.
    return streams;
  }
  if (req.node().empty()) {
    for (const auto& p : job.placement()) streams.push_back({p.node(), std::nullopt});
    return streams;
  }
  // One node: a node name, and one of the placement when the generation is current (older
  // placements are not kept; the log store opens only the stream of that name).
  if (auto s = CheckPathComponent("node", req.node(), 63); !s.ok()) return s;
  if (generation == job.generation()) {
    bool placed = false;
    for (const auto& p : job.placement()) placed = placed || p.node() == req.node();
    if (!placed) {
      return absl::InvalidArgumentError(
          absl::StrCat("node: ", req.node(), " is not in the placement of job ", job.id(), " generation ", generation));
    }
  }
  streams.push_back({req.node(), std::nullopt});
  return streams;
}

bool NodeExited(const hetpool::v1::Job& job, uint64_t generation, const std::string& node) {
  if (generation != job.generation()) return false;  // older placements are not kept
  for (const auto& p : job.placement()) {
    if (p.node() == node) return p.exited();
  }
  return false;
}

bool StartedDirectly(const hetpool::v1::Job& job, uint64_t generation, const std::string& node) {
  if (generation != job.generation()) return false;
  for (const auto& plan : job.launch_plan()) {
    if (plan.node() == node) return plan.launcher() == "direct";
  }
  return false;
}

std::vector<int> GlobalRanksOn(const hetpool::v1::Job& job, uint64_t generation, const std::string& node) {
  if (generation != job.generation()) return {};
  for (const auto& p : job.placement()) {
    if (p.node() == node) return RanksOf(job, p);
  }
  return {};
}

}  // namespace hetpool::daemon
