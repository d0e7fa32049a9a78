// JSON form of a node inventory: the `sim` backend's input and `hetpool-agent --print-inventory`'s
// output. Parsing never throws; every error names the offending field.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "hetpool/device.h"
#include "nlohmann/json.hpp"

namespace hetpool::drivers {

// Parses {"hostname"?, "cpus"?, "memory_mib"?, "devices": [{"vendor", "model", "memory_mib", ...}]}.
// Device ids default to "<vendor><index>", index counting per vendor in file order.
absl::StatusOr<NodeInventory> ParseInventoryJson(absl::string_view text);
nlohmann::json InventoryToJson(const NodeInventory& inventory);
nlohmann::json CapabilityToJson(const Capability& capability);

absl::string_view LinkKindName(LinkKind kind);
absl::StatusOr<LinkKind> ParseLinkKind(absl::string_view name);

}  // namespace hetpool::drivers
