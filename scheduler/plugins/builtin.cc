#include "scheduler/plugins/builtin.h"

#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler {
namespace {

using Factory = std::function<absl::StatusOr<std::shared_ptr<Plugin>>(const nlohmann::json&)>;

// A plugin without arguments: `args` must be absent or {}.
Factory NoArgs(const std::string& name, std::shared_ptr<Plugin> (*make)()) {
  return [name, make](const nlohmann::json& args) -> absl::StatusOr<std::shared_ptr<Plugin>> {
    if (args.is_null() || (args.is_object() && args.empty())) return make();
    return absl::InvalidArgumentError(absl::StrCat("plugin ", name, " takes no args"));
  };
}

const std::map<std::string, Factory>& Registry() {
  static const auto* registry = new std::map<std::string, Factory>{
      {"PrioritySort", NoArgs("PrioritySort", plugins::NewPrioritySort)},
      {"FairShare", NoArgs("FairShare", plugins::NewFairShareSort)},
      {"RequestShape", NoArgs("RequestShape", plugins::NewRequestShape)},
      {"Fingerprint", NoArgs("Fingerprint", plugins::NewFingerprint)},
      {"NodeSchedulable", NoArgs("NodeSchedulable", plugins::NewNodeSchedulable)},
      {"HostResources", NoArgs("HostResources", plugins::NewHostResources)},
      {"DeviceHealth", NoArgs("DeviceHealth", plugins::NewDeviceHealth)},
      {"Capacity", NoArgs("Capacity", plugins::NewCapacity)},
      {"Quota", NoArgs("Quota", plugins::NewQuota)},
      {"Reservation", NoArgs("Reservation", plugins::NewReservation)},
      {"ContainerRuntime", NoArgs("ContainerRuntime", plugins::NewContainerRuntime)},
      {"ImageLocality", NoArgs("ImageLocality", plugins::NewImageLocality)},
      {"BestFit", plugins::NewBestFit},
      {"TieRank", NoArgs("TieRank", plugins::NewTieRank)},
      {"HealthyCards", NoArgs("HealthyCards", plugins::NewHealthyCards)},
      {"Packing", NoArgs("Packing", plugins::NewPacking)},
      {"Random", plugins::NewRandom},
      {"Spread", NoArgs("Spread", plugins::NewSpread)},
      {"LinkScore", NoArgs("LinkScore", plugins::NewLinkScore)},
      {"Gang", NoArgs("Gang", plugins::NewGang)},
      {"Fgd", plugins::NewFgd},
  };
  return *registry;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Plugin>> MakeBuiltinPlugin(const std::string& name, const nlohmann::json& args) {
  auto it = Registry().find(name);
  if (it == Registry().end()) return absl::NotFoundError(absl::StrCat("unknown plugin '", name, "'"));
  return it->second(args);
}

std::vector<std::string> BuiltinPluginNames() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : Registry()) out.push_back(name);
  return out;
}

}  // namespace hetpool::scheduler
