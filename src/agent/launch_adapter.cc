#include "src/agent/launch_adapter.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hetpool/vendor.h"
#include "src/common/durable_file.h"

namespace hetpool::agent {

namespace {

constexpr char kStepsVariable[] = "HETPOOL_ADAPT";

// What the steps do, for the job's events.
std::string Describe(const std::vector<std::string>& steps) {
  std::vector<std::string> said;
  for (const std::string& step : steps) {
    if (step == "torch_mlu") said.push_back("cuda→mlu, nccl→cncl (torch_mlu's GPU migration)");
    if (step == "ipex") said.push_back("intel_extension_for_pytorch loaded");
    if (absl::StartsWith(step, "map:")) {
      const std::vector<std::string> parts = absl::StrSplit(step, ':');
      const std::string backend = parts.size() > 2 && parts[2] != "auto" ? parts[2] : "xccl or ccl";
      said.push_back(absl::StrCat("cuda→", parts.size() > 1 ? parts[1] : "cpu", ", nccl→", backend));
    }
  }
  return absl::StrCat("adapted: ", absl::StrJoin(said, "; "));
}

}  // namespace

absl::Status InstallLaunchAdapter(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("launch adapter: mkdir ", dir, ": ", strerror(errno)));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InternalError(absl::StrCat("launch adapter: ", dir, " is not a directory"));
  }
  if (chmod(dir.c_str(), 0755) != 0) {
    return absl::InternalError(absl::StrCat("launch adapter: chmod ", dir, ": ", strerror(errno)));
  }
  const std::string_view source = LaunchAdapterSource();
  return ReplaceFileDurably(dir + "/sitecustomize.py", absl::string_view(source.data(), source.size()), 0644);
}

void AdaptLaunch(const hetpool::v1::NodeLaunchPlan& plan, const AdapterContext& context, LaunchSpec& spec) {
  if (context.dir.empty()) return;
  if (plan.has_container()) {
    if (plan.adapt()) spec.AddNote("not adapted: it runs in an image");
    return;
  }
  // First on the path, the job's own entries after it.
  auto path = spec.env.find("PYTHONPATH");
  spec.env["PYTHONPATH"] =
      path == spec.env.end() || path->second.empty() ? context.dir : absl::StrCat(context.dir, ":", path->second);
  spec.env["HETPOOL_MERGE_STDERR"] = "1";
  if (!plan.adapt()) {
    spec.env.erase(kStepsVariable);
    spec.AddNote("not adapted (the job's \"adapt\": false)");
    return;
  }
  if (!context.node_allows) {
    spec.env.erase(kStepsVariable);
    spec.AddNote("not adapted: off on this node (hetpool-agent --adapt=false)");
    return;
  }
  const std::optional<Vendor> vendor = ParseVendor(plan.vendor());
  std::vector<std::string> steps;
  if (vendor) {
    for (absl::string_view step : absl::StrSplit(RuntimeOf(*vendor).adapter, ',', absl::SkipEmpty())) {
      // Simulated cards run on CPU: the vendor's own switch is still thrown (a fake torch_mlu in
      // the tests proves it), the device mapping is CPU's.
      if (!context.simulated || !absl::StartsWith(step, "map:")) steps.emplace_back(step);
    }
  }
  if (context.simulated) steps.emplace_back(RuntimeOf(Vendor::kCpu).adapter);
  if (steps.empty()) {
    spec.env.erase(kStepsVariable);
    spec.AddNote(vendor == Vendor::kMetax ? "not adapted: MACA's PyTorch answers to cuda and nccl"
                                          : "not adapted: cuda and nccl are this card's own");
    return;
  }
  spec.env[kStepsVariable] = absl::StrJoin(steps, ",");
  spec.AddNote(Describe(steps));
}

}  // namespace hetpool::agent
