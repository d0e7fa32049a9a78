#include "scheduler/link_score.h"

#include <algorithm>
#include <numeric>

namespace hetpool::scheduler {
namespace {

int PairScore(const DeviceRecord& a, const DeviceRecord& b) {
  int best = 0;
  for (const auto& l : a.links) {
    if (l.peer_device_id != b.id) continue;
    switch (l.kind) {
      case LinkKind::kNvLink:
      case LinkKind::kMetaxLink:
      case LinkKind::kMluLink:
      case LinkKind::kXeLink: best = std::max(best, 100 + l.count); break;
      case LinkKind::kPcieSwitch: best = std::max(best, 40); break;
      case LinkKind::kPcieHostBridge: best = std::max(best, 30); break;
      case LinkKind::kSameNuma: best = std::max(best, 20); break;
      case LinkKind::kCrossSocket: best = std::max(best, 10); break;
    }
  }
  return best;
}

// Visits every k-subset of [0, n) in lexicographic order.
template <typename Fn>
void ForEachSubset(int n, int k, Fn&& fn) {
  std::vector<int> idx(static_cast<size_t>(k));
  std::iota(idx.begin(), idx.end(), 0);
  while (true) {
    fn(idx);
    int i = k - 1;
    while (i >= 0 && idx[static_cast<size_t>(i)] == n - k + i) --i;
    if (i < 0) return;
    ++idx[static_cast<size_t>(i)];
    for (int j = i + 1; j < k; ++j) idx[static_cast<size_t>(j)] = idx[static_cast<size_t>(j - 1)] + 1;
  }
}

}  // namespace

std::vector<int> PairScoreTable(const std::vector<const DeviceRecord*>& devices) {
  const size_t n = devices.size();
  std::vector<int> table(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) table[i * n + j] = table[j * n + i] = PairScore(*devices[i], *devices[j]);
  }
  return table;
}

int LinkScoreFromTable(const std::vector<int>& table, size_t n, const std::vector<size_t>& positions) {
  int sum = 0, pairs = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    for (size_t j = i + 1; j < positions.size(); ++j) {
      sum += table[positions[i] * n + positions[j]];
      ++pairs;
    }
  }
  return pairs == 0 ? 0 : sum / pairs;
}

int LinkScore(const std::vector<const DeviceRecord*>& devices) {
  std::vector<size_t> all(devices.size());
  std::iota(all.begin(), all.end(), 0);
  return LinkScoreFromTable(PairScoreTable(devices), devices.size(), all);
}

std::vector<size_t> ChooseFromTable(const std::vector<int>& table, size_t table_n, const std::vector<size_t>& free,
                                    int count) {
  const int n = static_cast<int>(free.size());
  if (count > n || count <= 0) return {};
  if (count == n) return free;
  // Every subset is table lookups: subsets of a node's devices are few (C(8,4) = 70,
  // C(16,8) = 12,870), so search them all.
  auto pair = [&](int i, int j) {
    return table[free[static_cast<size_t>(i)] * table_n + free[static_cast<size_t>(j)]];
  };
  // A subset's score is the average over its pairs, its rest's the average over the pairs of the
  // devices left (as LinkScore computes them). The rest's sum comes from the members' alone: all
  // pairs, less every pair touching a member (each member's row), plus the members' own pairs
  // (counted twice in the rows). A subset then costs its own pairs, not every device's.
  std::vector<int> row(static_cast<size_t>(n), 0);
  int all_sum = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const int p = pair(i, j);
      all_sum += p;
      row[static_cast<size_t>(i)] += p;
      row[static_cast<size_t>(j)] += p;
    }
  }
  auto pairs_of = [](int k) { return k * (k - 1) / 2; };
  const int in_pairs = pairs_of(count), rest_pairs = pairs_of(n - count);
  std::vector<int> best;
  int best_score = -1, best_rest = -1;
  ForEachSubset(n, count, [&](const std::vector<int>& pick) {
    int in_sum = 0, rows = 0;
    for (size_t a = 0; a < pick.size(); ++a) {
      rows += row[static_cast<size_t>(pick[a])];
      for (size_t b = a + 1; b < pick.size(); ++b) in_sum += pair(pick[a], pick[b]);
    }
    const int score = in_pairs == 0 ? 0 : in_sum / in_pairs;
    const int rest_score = rest_pairs == 0 ? 0 : (all_sum - rows + in_sum) / rest_pairs;
    if (score > best_score || (score == best_score && rest_score > best_rest)) {
      best = pick;
      best_score = score;
      best_rest = rest_score;
    }
  });
  std::vector<size_t> out;
  for (int i : best) out.push_back(free[static_cast<size_t>(i)]);
  return out;
}

std::vector<const DeviceRecord*> ChooseDevices(const std::vector<const DeviceRecord*>& free_in, int count) {
  std::vector<const DeviceRecord*> free = free_in;
  std::sort(free.begin(), free.end(), [](const DeviceRecord* a, const DeviceRecord* b) { return a->index < b->index; });
  std::vector<size_t> positions(free.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<const DeviceRecord*> out;
  for (size_t i : ChooseFromTable(PairScoreTable(free), free.size(), positions, count)) out.push_back(free[i]);
  return out;
}

}  // namespace hetpool::scheduler
