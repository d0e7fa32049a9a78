#include "src/daemon/launch/collective.h"

#include "absl/strings/str_cat.h"

namespace hetpool::daemon {

std::string ChooseCollective(const std::string& requested, bool every_node_has_flagcx) {
  if (!requested.empty() && requested != "auto") return requested;
  return every_node_has_flagcx ? "flagcx" : "hierarchical";
}

CollectiveBackends BackendsFor(const std::string& collective, const VendorRuntime& runtime) {
  if (collective == "flagcx") {
    // FlagCX's torch plugin registers backend "flagcx" for device tensors; CPU tensors stay on gloo.
    const std::string both = absl::StrCat("cpu:gloo,", runtime.torch_device, ":flagcx");
    return {both, both, both};
  }
  if (collective == "hierarchical") return {"gloo", std::string(runtime.dist_backend), "gloo"};
  return {"gloo", "gloo", "gloo"};
}

}  // namespace hetpool::daemon
