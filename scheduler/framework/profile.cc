#include "scheduler/framework/profile.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "scheduler/plugins/builtin.h"

namespace hetpool::scheduler {
namespace {

constexpr char kDefaultProfile[] = R"({
  "preFilter": ["RequestShape"],
  "filter": ["Fingerprint", "NodeSchedulable", "DeviceHealth", "Capacity"],
  "score": [{"name": "BestFit", "weight": 3}, {"name": "LinkScore", "weight": 1},
            {"name": "Fgd", "weight": 1, "args": {"window": 500}}],
  "permit": ["Gang"]
})";

constexpr int kMaxWeight = 100;

struct Entry {
  std::string name;
  int weight = 1;
  nlohmann::json args;
};

absl::StatusOr<std::vector<Entry>> Entries(const nlohmann::json& profile, const char* point, bool weighted) {
  std::vector<Entry> out;
  if (!profile.contains(point)) return out;
  const nlohmann::json& list = profile[point];
  if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat("profile: \"", point, "\" must be a list"));
  std::set<std::string> seen;
  for (const auto& item : list) {
    Entry e;
    if (item.is_string()) {
      e.name = item.get<std::string>();
    } else if (item.is_object() && item.contains("name") && item["name"].is_string()) {
      e.name = item["name"].get<std::string>();
      for (const auto& [key, value] : item.items()) {
        if (key == "name") continue;
        if (key == "args") {
          e.args = value;
        } else if (key == "weight" && weighted) {
          if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > kMaxWeight) {
            return absl::InvalidArgumentError(absl::StrCat("profile: ", point, " ", e.name, ": weight must be an integer in 1..",
                                                           kMaxWeight));
          }
          e.weight = value.get<int>();
        } else {
          return absl::InvalidArgumentError(absl::StrCat("profile: ", point, " ", e.name, ": unknown key '", key, "'"));
        }
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("profile: ", point, " entries are plugin names or {\"name\", \"weight\", \"args\"}"));
    }
    if (!seen.insert(e.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("profile: ", point, " lists ", e.name, " twice"));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Framework>> FrameworkFromProfile(absl::string_view json_text) {
  const nlohmann::json profile = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (profile.is_discarded() || !profile.is_object()) return absl::InvalidArgumentError("profile: not a JSON object");
  const std::set<std::string> points = {"preFilter", "filter", "score", "permit", "reserve", "nodesToScore"};
  for (const auto& [key, value] : profile.items()) {
    if (!points.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("profile: unknown extension point '", key,
                                                     "' (preFilter, filter, score, permit, reserve; nodesToScore)"));
    }
  }
  size_t nodes_to_score = Framework::kDefaultNodesToScore;
  if (profile.contains("nodesToScore")) {
    const auto& n = profile["nodesToScore"];
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > 1000000) {
      return absl::InvalidArgumentError("profile: nodesToScore must be an integer in 1..1000000");
    }
    nodes_to_score = n.get<size_t>();
  }
  Framework::Plugins plugins;
  std::map<std::string, std::shared_ptr<Plugin>> instances;  // one object per plugin name
  auto instance = [&](const Entry& e, const char* point) -> absl::StatusOr<Plugin*> {
    if (auto it = instances.find(e.name); it != instances.end()) return it->second.get();
    auto made = MakeBuiltinPlugin(e.name, e.args);
    if (!made.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("profile: ", point, ": ", made.status().message(),
                                                     absl::IsNotFound(made.status())
                                                         ? absl::StrCat(" (known: ", absl::StrJoin(BuiltinPluginNames(), ", "), ")")
                                                         : ""));
    }
    plugins.owned.push_back(*made);
    instances[e.name] = *made;
    return made->get();
  };
  auto wrong_point = [](const Entry& e, const char* point) {
    return absl::InvalidArgumentError(absl::StrCat("profile: ", e.name, " is not a ", point, " plugin"));
  };

  auto pre = Entries(profile, "preFilter", false);
  if (!pre.ok()) return pre.status();
  for (const Entry& e : *pre) {
    auto p = instance(e, "preFilter");
    if (!p.ok()) return p.status();
    auto* typed = dynamic_cast<PreFilterPlugin*>(*p);
    if (!typed) return wrong_point(e, "preFilter");
    plugins.pre_filter.push_back(typed);
  }
  auto filters = Entries(profile, "filter", false);
  if (!filters.ok()) return filters.status();
  for (const Entry& e : *filters) {
    auto p = instance(e, "filter");
    if (!p.ok()) return p.status();
    if (auto* node = dynamic_cast<NodeFilterPlugin*>(*p)) {
      plugins.node_filter.push_back(node);
    } else if (auto* device = dynamic_cast<DeviceFilterPlugin*>(*p)) {
      plugins.device_filter.push_back(device);
    } else {
      return wrong_point(e, "filter");
    }
  }
  auto scores = Entries(profile, "score", true);
  if (!scores.ok()) return scores.status();
  for (const Entry& e : *scores) {
    auto p = instance(e, "score");
    if (!p.ok()) return p.status();
    auto* typed = dynamic_cast<ScorePlugin*>(*p);
    if (!typed) return wrong_point(e, "score");
    plugins.score.push_back({typed, e.weight});
    if (auto* reserve = dynamic_cast<ReservePlugin*>(*p)) plugins.reserve.push_back(reserve);
  }
  auto permits = Entries(profile, "permit", false);
  if (!permits.ok()) return permits.status();
  for (const Entry& e : *permits) {
    auto p = instance(e, "permit");
    if (!p.ok()) return p.status();
    auto* typed = dynamic_cast<PermitPlugin*>(*p);
    if (!typed) return wrong_point(e, "permit");
    plugins.permit.push_back(typed);
  }
  auto reserves = Entries(profile, "reserve", false);
  if (!reserves.ok()) return reserves.status();
  for (const Entry& e : *reserves) {
    auto p = instance(e, "reserve");
    if (!p.ok()) return p.status();
    auto* typed = dynamic_cast<ReservePlugin*>(*p);
    if (!typed) return wrong_point(e, "reserve");
    if (std::find(plugins.reserve.begin(), plugins.reserve.end(), typed) == plugins.reserve.end()) {
      plugins.reserve.push_back(typed);
    }
  }
  // Leaving these out would double-book devices, run jobs on cards that cannot run them, or
  // start part of a gang.
  for (const char* required : {"Fingerprint", "NodeSchedulable", "DeviceHealth", "Capacity"}) {
    if (!instances.contains(required)) {
      return absl::InvalidArgumentError(absl::StrCat("profile: filter must include ", required));
    }
  }
  if (!instances.contains("Gang")) return absl::InvalidArgumentError("profile: permit must include Gang");
  return std::make_unique<Framework>(std::move(plugins), nodes_to_score);
}

absl::string_view DefaultProfileJson() { return kDefaultProfile; }

std::unique_ptr<Framework> DefaultFramework() {
  auto framework = FrameworkFromProfile(kDefaultProfile);
  return *std::move(framework);  // the built-in profile is valid (tested)
}

}  // namespace hetpool::scheduler
