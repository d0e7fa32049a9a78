#include "scheduler/framework/profile.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "scheduler/plugins/builtin.h"

namespace hetpool::scheduler {
namespace {

constexpr char kDefaultProfile[] = R"({
  "queueSort": ["FairShare"],
  "preFilter": ["RequestShape"],
  "filter": ["Fingerprint", "NodeSchedulable", "ContainerRuntime", "HostResources", "DeviceHealth", "Capacity", "Quota",
             "Reservation"],
  "score": [{"name": "Fgd", "weight": 100, "args": {"mix": "submitted", "window": 500, "size_damping": 2.5}},
            {"name": "LinkScore", "weight": 10}, {"name": "ImageLocality", "weight": 10}, {"name": "TieRank", "weight": 1},
            {"name": "HealthyCards", "weight": 1000}],
  "permit": ["Gang"],
  "nodesToFind": 100
})";

constexpr int kMaxWeight = 1000;

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
            return absl::InvalidArgumentError(
                absl::StrCat("profile: ", point, " ", e.name, ": weight must be an integer in 1..", kMaxWeight));
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

// An optional node count of the profile (`key`), in min..1000000; 0 means adaptive where allowed.
absl::StatusOr<size_t> NodeCount(const nlohmann::json& profile, const char* key, int64_t min, size_t fallback) {
  constexpr int64_t kMax = 1000000;
  if (!profile.contains(key)) return fallback;
  const nlohmann::json& n = profile[key];
  if (!n.is_number_integer() || n.get<int64_t>() < min || n.get<int64_t>() > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile: ", key, " must be an integer in ", min, "..", kMax, min == 0 ? " (0: adaptive)" : ""));
  }
  return n.get<size_t>();
}

// Files each plugin of a profile at its points: one object per plugin name, however many points
// list it.
class ProfileFiler {
 public:
  explicit ProfileFiler(const nlohmann::json& profile) : profile_(profile) {}

  // Every point's entries, in the order the framework runs them.
  absl::Status FileAll();
  // The plugins no profile may leave out, and ContainerRuntime added where one does.
  absl::Status CompleteRequired();
  Framework::Plugins Take() { return std::move(plugins); }

 private:
  absl::StatusOr<Plugin*> Instance(const Entry& e, const char* point) {
    if (auto it = instances.find(e.name); it != instances.end()) return it->second.get();
    auto made = MakeBuiltinPlugin(e.name, e.args);
    if (!made.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "profile: ", point, ": ", made.status().message(),
          absl::IsNotFound(made.status()) ? absl::StrCat(" (known: ", absl::StrJoin(BuiltinPluginNames(), ", "), ")")
                                          : ""));
    }
    plugins.owned.push_back(*made);
    instances[e.name] = *made;
    return made->get();
  }
  // Each point's entries, in order; `add` files the plugin and says whether it fits the point.
  template <typename Add>
  absl::Status Each(const char* point, bool weighted, Add&& add) {
    auto entries = Entries(profile_, point, weighted);
    if (!entries.ok()) return entries.status();
    for (const Entry& e : *entries) {
      auto p = Instance(e, point);
      if (!p.ok()) return p.status();
      if (!add(*p, e))
        return absl::InvalidArgumentError(absl::StrCat("profile: ", e.name, " is not a ", point, " plugin"));
    }
    return absl::OkStatus();
  }

  const nlohmann::json& profile_;
  Framework::Plugins plugins;
  std::map<std::string, std::shared_ptr<Plugin>> instances;
};

absl::Status ProfileFiler::FileAll() {
  const nlohmann::json& profile = profile_;
  auto each = [this](const char* point, bool weighted, auto&& add) { return Each(point, weighted, add); };
  // One queue order: two would have to be merged, and no merge is obviously right.
  if (profile.contains("queueSort") && profile["queueSort"].is_array() && profile["queueSort"].size() > 1) {
    return absl::InvalidArgumentError("profile: queueSort takes one plugin");
  }
  absl::Status s = each("queueSort", false, [&](Plugin* p, const Entry&) {
    auto* typed = dynamic_cast<QueueSortPlugin*>(p);
    if (typed) plugins.queue_sort = typed;
    return typed != nullptr;
  });
  if (s.ok()) {
    s = each("preFilter", false, [&](Plugin* p, const Entry&) {
      auto* typed = dynamic_cast<PreFilterPlugin*>(p);
      if (typed) plugins.pre_filter.push_back(typed);
      return typed != nullptr;
    });
  }
  if (s.ok()) {
    s = each("filter", false, [&](Plugin* p, const Entry&) {
      if (auto* node = dynamic_cast<NodeFilterPlugin*>(p)) {
        plugins.node_filter.push_back(node);
      } else if (auto* device = dynamic_cast<DeviceFilterPlugin*>(p)) {
        plugins.device_filter.push_back(device);
      } else {
        return false;
      }
      return true;
    });
  }
  if (s.ok()) {
    s = each("score", true, [&](Plugin* p, const Entry& e) {
      auto* typed = dynamic_cast<ScorePlugin*>(p);
      if (!typed) return false;
      plugins.score.push_back({typed, e.weight});
      if (auto* reserve = dynamic_cast<ReservePlugin*>(p)) plugins.reserve.push_back(reserve);
      return true;
    });
  }
  if (s.ok()) {
    s = each("permit", false, [&](Plugin* p, const Entry&) {
      auto* typed = dynamic_cast<PermitPlugin*>(p);
      if (typed) plugins.permit.push_back(typed);
      return typed != nullptr;
    });
  }
  if (s.ok()) {
    s = each("reserve", false, [&](Plugin* p, const Entry&) {
      auto* typed = dynamic_cast<ReservePlugin*>(p);
      if (typed && std::find(plugins.reserve.begin(), plugins.reserve.end(), typed) == plugins.reserve.end()) {
        plugins.reserve.push_back(typed);
      }
      return typed != nullptr;
    });
  }
  return s;
}

absl::Status ProfileFiler::CompleteRequired() {
  // Leaving these out would double-book devices or host CPU and memory, run jobs on cards that
  // cannot run them, or start part of a gang.
  for (const char* required :
       {"Fingerprint", "NodeSchedulable", "DeviceHealth", "Capacity", "HostResources", "Quota", "Reservation"}) {
    if (!instances.contains(required)) {
      return absl::InvalidArgumentError(absl::StrCat("profile: filter must include ", required));
    }
  }
  if (!instances.contains("Gang")) return absl::InvalidArgumentError("profile: permit must include Gang");
  // Added when a profile leaves it out (profiles written before jobs ran in images): without it
  // an image job could land on a node that cannot start it.
  if (!instances.contains("ContainerRuntime")) {
    auto made = MakeBuiltinPlugin("ContainerRuntime", nlohmann::json());
    plugins.owned.push_back(*made);
    plugins.node_filter.push_back(dynamic_cast<NodeFilterPlugin*>(made->get()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Framework>> FrameworkFromProfile(absl::string_view json_text) {
  const nlohmann::json profile = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (profile.is_discarded() || !profile.is_object()) return absl::InvalidArgumentError("profile: not a JSON object");
  const std::set<std::string> points = {"queueSort", "preFilter", "filter",       "score",
                                        "permit",    "reserve",   "nodesToScore", "nodesToFind"};
  for (const auto& [key, value] : profile.items()) {
    if (!points.contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile: unknown extension point '", key,
                       "' (queueSort, preFilter, filter, score, permit, reserve; nodesToScore, nodesToFind)"));
    }
  }
  auto nodes_to_score = NodeCount(profile, "nodesToScore", 1, Framework::kDefaultNodesToScore);
  if (!nodes_to_score.ok()) return nodes_to_score.status();
  auto nodes_to_find = NodeCount(profile, "nodesToFind", 0, 0);  // 0: adaptive
  if (!nodes_to_find.ok()) return nodes_to_find.status();
  ProfileFiler filer(profile);
  if (absl::Status s = filer.FileAll(); !s.ok()) return s;
  if (absl::Status s = filer.CompleteRequired(); !s.ok()) return s;
  return std::make_unique<Framework>(filer.Take(), *nodes_to_score, *nodes_to_find);
}

absl::string_view DefaultProfileJson() { return kDefaultProfile; }

std::unique_ptr<Framework> DefaultFramework() {
  auto framework = FrameworkFromProfile(kDefaultProfile);
  return *std::move(framework);  // the built-in profile is valid (tested)
}

}  // namespace hetpool::scheduler
