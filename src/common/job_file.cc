#include "src/common/job_file.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace hetpool {

absl::StatusOr<std::string> ExpandJobFileShorthands(absl::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::string(json);
  auto nnodes = doc.find("nnodes");
  if (nnodes == doc.end() || !nnodes->is_object()) return std::string(json);
  const nlohmann::json range = *nnodes;
  for (const auto& [key, value] : range.items()) {
    if (key != "min" && key != "max") {
      return absl::InvalidArgumentError(
          absl::StrCat("nnodes: unknown key '", key, "' (an elastic job writes {\"min\": N, \"max\": M})"));
    }
    if (!value.is_number_integer()) return absl::InvalidArgumentError(absl::StrCat("nnodes.", key, ": not an integer"));
  }
  if (!range.contains("min") || !range.contains("max")) {
    return absl::InvalidArgumentError("nnodes: an elastic job names both min and max ({\"min\": N, \"max\": M})");
  }
  if (doc.contains("elastic_nnodes") || doc.contains("elasticNnodes")) {
    return absl::InvalidArgumentError("nnodes: {min, max} and elastic_nnodes both given; write one");
  }
  doc["elastic_nnodes"] = range;
  doc["nnodes"] = range["min"];
  return doc.dump();
}

}  // namespace hetpool
