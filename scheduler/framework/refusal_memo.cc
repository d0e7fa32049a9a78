#include "scheduler/framework/refusal_memo.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hetpool::scheduler {

namespace {

// Folds the generations in order; 0 when one is 0 (unknown).
template <typename Generations>
uint64_t KeyOf(size_t count, Generations&& generation_at) {
  uint64_t key = 0x9e3779b97f4a7c15ull ^ count;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t generation = generation_at(i);
    if (generation == 0) return 0;
    key = (key ^ generation) * 0x100000001b3ull + (key >> 29);
  }
  return key == 0 ? 1 : key;
}

}  // namespace

uint64_t RefusalMemo::ViewsKey(const std::vector<NodeView>& nodes) {
  return KeyOf(nodes.size(), [&](size_t i) { return nodes[i].generation; });
}

uint64_t RefusalMemo::ViewsKey(std::span<const uint64_t> generations) {
  return KeyOf(generations.size(), [&](size_t i) { return generations[i]; });
}

std::string RefusalMemo::RequestKey(const PlacementRequest& r) {
  const Requirements& q = r.requirements;
  const drivers::RunRequirements& run = q.run;
  std::vector<int> vendors, precisions;
  for (Vendor v : q.vendors) vendors.push_back(static_cast<int>(v));
  for (Precision p : run.precisions) precisions.push_back(static_cast<int>(p));
  constexpr char kSep[] = "\x1f";
  return absl::StrCat(r.nnodes, "/", r.devices_per_node, "/", r.device_milli, "/", r.device_memory_mib, "/",
                      r.cpu_milli, "/", r.host_memory_mib, "|", absl::StrJoin(vendors, kSep), "|",
                      absl::StrJoin(q.models, kSep), "|", absl::StrJoin(q.fingerprints, kSep), "|", run.code.pytorch,
                      run.code.maca, run.code.spirv, "|", absl::StrJoin(run.code.cuda_sass, kSep), "|",
                      absl::StrJoin(run.code.cuda_ptx, kSep), "|", absl::StrJoin(run.code.bang, kSep), "|",
                      absl::StrJoin(precisions, kSep), "|", run.min_memory_mib, "|", run.min_driver_version, "|",
                      run.min_runtime_version, "|", r.quota_blocked ? "q:" : "", r.quota_owner);
}

std::optional<absl::Status> RefusalMemo::Find(const std::string& request_key, uint64_t views_key) const {
  if (views_key == 0 || refusals_.empty()) return std::nullopt;
  auto it = refusals_.find(request_key);
  if (it == refusals_.end() || it->second.first != views_key) return std::nullopt;
  return it->second.second;
}

void RefusalMemo::Remember(const std::string& request_key, uint64_t views_key, absl::Status refusal) {
  if (views_key == 0 || refusal.ok()) return;
  if (refusals_.size() >= kMaxRemembered) refusals_.clear();
  refusals_[request_key] = {views_key, std::move(refusal)};
}

}  // namespace hetpool::scheduler
