// The p-th quantile (0..1) of a sample, nearest rank below; 0 for an empty sample. Shared by the
// benchmark programs so their p50/p99 figures mean the same thing.
#pragma once

#include <algorithm>
#include <vector>

namespace hetpool::bench {

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace hetpool::bench
