#include "src/daemon/launch/batch_split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hetpool::daemon {

absl::StatusOr<BatchSplit> SplitGlobalBatch(int global_batch, const std::vector<SplitNode>& nodes,
                                            const std::string& precision) {
  struct Rank {
    size_t node;
    double ideal;
    int batch;
  };
  std::vector<Rank> ranks;
  BatchSplit split;
  // One class of cards: an even split, whatever its speed.
  const bool one_class =
      std::all_of(nodes.begin(), nodes.end(), [&](const SplitNode& n) { return n.label == nodes.front().label; });
  split.by_speed = !nodes.empty() && !one_class;
  std::vector<std::string> unknown;
  for (const SplitNode& n : nodes) {
    if (one_class || n.tflops.has_value()) continue;
    split.by_speed = false;
    if (std::find(unknown.begin(), unknown.end(), n.label) == unknown.end()) unknown.push_back(n.label);
  }
  double total_speed = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    total_speed += nodes[i].ranks * (split.by_speed ? *nodes[i].tflops : 1.0);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const double speed = split.by_speed ? *nodes[i].tflops : 1.0;
    for (int r = 0; r < nodes[i].ranks; ++r) ranks.push_back({i, global_batch * speed / total_speed, 0});
  }
  if (ranks.empty()) return absl::InvalidArgumentError("no ranks to split a batch over");
  if (global_batch < static_cast<int>(ranks.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_batch ", global_batch, " is smaller than the ", ranks.size(), " ranks"));
  }
  // Largest remainder: floors first (at least 1), then the samples left to the largest fractions.
  int assigned = 0;
  for (Rank& r : ranks) {
    r.batch = std::max(1, static_cast<int>(std::floor(r.ideal)));
    assigned += r.batch;
  }
  std::vector<size_t> order(ranks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranks[a].ideal - ranks[a].batch > ranks[b].ideal - ranks[b].batch;
  });
  for (size_t k = 0; assigned < global_batch; k = (k + 1) % order.size(), ++assigned) ++ranks[order[k]].batch;
  // The floors of 1 may have given out more than there is: take back from the ranks furthest above
  // their share (never below 1; global_batch >= ranks, so it ends).
  while (assigned > global_batch) {
    auto over = std::max_element(ranks.begin(), ranks.end(), [](const Rank& a, const Rank& b) {
      return (a.batch > 1 ? a.batch - a.ideal : -1e300) < (b.batch > 1 ? b.batch - b.ideal : -1e300);
    });
    --over->batch;
    --assigned;
  }
  split.micro_batches.assign(nodes.size(), {});
  for (const Rank& r : ranks) split.micro_batches[r.node].push_back(r.batch);

  // The summary: one entry per class, in placement order.
  std::vector<std::string> parts;
  std::map<std::string, bool> said;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (said[nodes[i].label]) continue;
    said[nodes[i].label] = true;
    int class_ranks = 0;
    std::vector<int> batches;
    for (size_t j = i; j < nodes.size(); ++j) {
      if (nodes[j].label != nodes[i].label) continue;
      class_ranks += nodes[j].ranks;
      batches.insert(batches.end(), split.micro_batches[j].begin(), split.micro_batches[j].end());
    }
    const auto [lo, hi] = std::minmax_element(batches.begin(), batches.end());
    parts.push_back(
        absl::StrCat(nodes[i].label, ": ", class_ranks, " rank(s) x ", *lo, *hi != *lo ? absl::StrCat("-", *hi) : "",
                     !split.by_speed   ? ""
                     : nodes[i].tflops ? absl::StrCat(" (", *nodes[i].tflops, " TFLOPS ", precision, " modelled)")
                                       : absl::StrCat(" (no ", precision, " peak known)")));
  }
  split.summary = absl::StrJoin(parts, "; ");
  if (!unknown.empty()) {
    absl::StrAppend(&split.summary, "; split evenly: no ", precision, " peak for ", absl::StrJoin(unknown, ", "),
                    " (give one in the spec table)");
  }
  return split;
}

}  // namespace hetpool::daemon
