// The inventory format (sim backend fixtures, `hetpool-agent --print-inventory`, `hetpoolctl plan
// --pool`): parse, and write back what parsed.
#include <cstddef>
#include <cstdint>

#include "drivers/inventory_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto inventory = hetpool::drivers::ParseInventoryJson(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (inventory.ok()) (void)hetpool::drivers::InventoryToJson(*inventory).dump();
  return 0;
}
