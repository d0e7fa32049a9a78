#include "drivers/inventory_tracker.h"

#include "gtest/gtest.h"

namespace hetpool::drivers {
namespace {

DeviceRecord Gpu(int index, const std::string& uuid) {
  DeviceRecord d;
  d.vendor = Vendor::kNvidia;
  d.index = index;
  d.id = "nvidia" + std::to_string(index);
  d.uuid = uuid;
  return d;
}

TEST(InventoryTracker, IdsFollowCardsAndVanishedCardsStayUnhealthy) {
  InventoryTracker tracker;
  NodeInventory first;
  first.devices = {Gpu(0, "A"), Gpu(1, "B"), Gpu(2, "C")};
  first.devices[2].links.push_back({"nvidia1", LinkKind::kNvLink, 4});
  first = tracker.Update(first);
  ASSERT_EQ(first.devices.size(), 3u);

  // B falls off the bus: the library renumbers C to index 1.
  NodeInventory second;
  second.devices = {Gpu(0, "A"), Gpu(1, "C")};
  second = tracker.Update(second);
  ASSERT_EQ(second.devices.size(), 3u);
  EXPECT_EQ(second.devices[1].id, "nvidia2");  // C keeps its id...
  EXPECT_EQ(second.devices[1].index, 1);       // ...with the library's new index
  EXPECT_EQ(second.devices[2].uuid, "B");
  EXPECT_FALSE(second.devices[2].healthy);

  // B comes back; a new card D takes a free id.
  NodeInventory third;
  third.devices = {Gpu(0, "A"), Gpu(1, "B"), Gpu(2, "C"), Gpu(3, "D")};
  third.devices[3].links.push_back({"nvidia1", LinkKind::kNvLink, 2});  // backend ids: nvidia1 = B
  third = tracker.Update(third);
  ASSERT_EQ(third.devices.size(), 4u);
  for (const auto& d : third.devices) EXPECT_TRUE(d.healthy) << d.id;
  EXPECT_EQ(third.devices[1].id, "nvidia1");
  EXPECT_EQ(third.devices[3].id, "nvidia3");
  EXPECT_EQ(third.devices[3].links[0].peer_device_id, "nvidia1");
}

TEST(InventoryTracker, LinksFollowRenamedPeers) {
  InventoryTracker tracker;
  NodeInventory first;
  first.devices = {Gpu(0, "A"), Gpu(1, "B"), Gpu(2, "C")};
  tracker.Update(first);
  NodeInventory second;  // A is gone; the library calls B nvidia0 and C nvidia1
  second.devices = {Gpu(0, "B"), Gpu(1, "C")};
  second.devices[1].links.push_back({"nvidia0", LinkKind::kNvLink, 4});
  second = tracker.Update(second);
  EXPECT_EQ(second.devices[1].id, "nvidia2");
  EXPECT_EQ(second.devices[1].links[0].peer_device_id, "nvidia1");
}

}  // namespace
}  // namespace hetpool::drivers
