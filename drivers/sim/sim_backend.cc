#include "drivers/sim/sim_backend.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "drivers/inventory_json.h"

namespace hetpool::drivers {

absl::StatusOr<NodeInventory> SimBackend::ReadInventory() const {
  std::ifstream in(path_);
  if (!in) return absl::NotFoundError(absl::StrCat("sim inventory '", path_, "' cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  auto inventory = ParseInventoryJson(text.str());
  if (!inventory.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", inventory.status().message()));
  }
  return inventory;
}

absl::StatusOr<std::vector<DeviceRecord>> SimBackend::Discover() {
  auto inventory = ReadInventory();
  if (!inventory.ok()) return inventory.status();
  return std::move(inventory->devices);
}

}  // namespace hetpool::drivers
