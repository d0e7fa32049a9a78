#include "drivers/inventory_json.h"

#include "gtest/gtest.h"

namespace hetpool::drivers {
namespace {

TEST(InventoryJson, ParsesDevicesAssigningIdsPerVendor) {
  auto inv = ParseInventoryJson(R"({"cpus": 8, "memory_mib": 1024, "devices": [
      {"vendor": "nvidia", "model": "A100", "memory_mib": 81920, "links": [{"peer": "nvidia1", "kind": "nvlink", "count": 12}]},
      {"vendor": "nvidia", "model": "A100", "memory_mib": 81920},
      {"vendor": "metax", "model": "MXC500", "memory_mib": 65536, "numa_node": 1}]})");
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_EQ(inv->devices.size(), 3u);
  EXPECT_EQ(inv->devices[0].id, "nvidia0");
  EXPECT_EQ(inv->devices[1].id, "nvidia1");
  EXPECT_EQ(inv->devices[2].id, "metax0");
  EXPECT_EQ(inv->devices[2].index, 0);
  EXPECT_EQ(inv->devices[2].numa_node, 1);
  EXPECT_EQ(inv->devices[0].links[0].kind, LinkKind::kNvLink);
  EXPECT_EQ(inv->devices[0].links[0].count, 12);
  EXPECT_EQ(inv->cpus, 8);
}

TEST(InventoryJson, RoundTripsThroughPrintInventoryForm) {
  auto inv = ParseInventoryJson(R"({"devices": [{"vendor": "intel", "model": "Max1550", "memory_mib": 131072}]})");
  ASSERT_TRUE(inv.ok());
  auto again = ParseInventoryJson(InventoryToJson(*inv).dump());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->devices[0].model, "Max1550");
  EXPECT_EQ(again->devices[0].vendor, Vendor::kIntel);
}

TEST(InventoryJson, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* expect;
  } cases[] = {
      {"not json", "inventory: not valid JSON"},
      {"[]", "inventory: must be a JSON object"},
      {R"({"devices": [{"vendor": "amd", "model": "x", "memory_mib": 1}]})", "inventory.devices[0].vendor"},
      {R"({"devices": [{"vendor": "cpu", "model": "x", "memory_mib": 1}]})", "inventory.devices[0].vendor"},
      {R"({"devices": [{"vendor": "nvidia", "memory_mib": 1}]})", "inventory.devices[0].model"},
      {R"({"devices": [{"vendor": "nvidia", "model": "x"}]})", "inventory.devices[0].memory_mib"},
      {R"({"devices": [{"vendor": "nvidia", "model": "x", "memory_mib": "lots"}]})", "inventory.devices[0].memory_mib"},
      {R"({"devices": [{"vendor": "nvidia", "model": "x", "memory_mib": 1, "colour": 1}]})",
       "inventory.devices[0].colour"},
      {R"({"devices": [{"vendor": "nvidia", "model": "x", "memory_mib": 1, "links": [{"peer": "nvidia7", "kind": "nvlink"}]}]})",
       "inventory.devices[nvidia0].links"},
      {R"({"devices": [{"vendor": "nvidia", "model": "x", "memory_mib": 1, "links": [{"peer": "nvidia0", "kind": "warp"}]}]})",
       "inventory.devices[0].links[0].kind"},
      {R"({"devices": [{"id": "g", "vendor": "nvidia", "model": "x", "memory_mib": 1}, {"id": "g", "vendor": "nvidia", "model": "x", "memory_mib": 1}]})",
       "duplicate id"},
      {R"({"cpus": -1})", "inventory.cpus"},
  };
  for (const auto& c : cases) {
    auto inv = ParseInventoryJson(c.json);
    ASSERT_FALSE(inv.ok()) << c.json;
    EXPECT_EQ(inv.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(inv.status().message()).find(c.expect), std::string::npos)
        << c.json << " -> " << inv.status().message();
  }
}

}  // namespace
}  // namespace hetpool::drivers
