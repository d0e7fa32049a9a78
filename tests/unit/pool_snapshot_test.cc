// SnapshotOf: what a metrics scrape reads, copied under the state lock with each card naming its
// node and its kind by index.
#include "src/daemon/state/pool_queries.h"

#include <map>
#include <string>

#include "drivers/fingerprint/fingerprint.h"
#include "gtest/gtest.h"
#include "tests/testing/state_parts.h"

namespace hetpool::daemon {
namespace {

using testing::StateParts;

TEST(PoolSnapshot, CardsNameTheirNodeAndKindAndCarryWhatTheyHold) {
  StateParts parts;
  NodeEntry& a = parts.Register("a", 2);
  NodeInventory metax = testing::H100s(2);
  for (DeviceRecord& d : metax.devices) {
    d.vendor = Vendor::kMetax;
    d.id = "metax" + std::to_string(d.index);
    d.model = "MXC500";
    drivers::ApplyFingerprint(drivers::SpecTable::Defaults(), d);
  }
  parts.nodes.Register(testing::Registration("b"), metax, parts.now);
  Claim half;
  half.device_ids = {"nvidia1"};
  half.device_milli = 500;
  a.claims[{"job-000001", 1}] = half;

  const PoolSnapshot snap = SnapshotOf(parts.nodes, parts.jobs, parts.now);
  ASSERT_EQ(snap.nodes.size(), 2u);
  ASSERT_EQ(snap.kinds.size(), 2u);  // one per vendor, model and class, not one per card
  ASSERT_EQ(snap.devices.size(), 4u);
  std::map<std::string, const DeviceSample*> by_card;
  for (const DeviceSample& d : snap.devices) by_card[snap.nodes[d.node].name + "/" + d.device] = &d;
  ASSERT_TRUE(by_card.contains("a/nvidia1") && by_card.contains("b/metax0")) << by_card.size();
  const CardKind& h100 = snap.kinds[by_card["a/nvidia1"]->kind];
  EXPECT_EQ(h100.vendor, "nvidia");
  EXPECT_EQ(h100.model, "H100");
  EXPECT_EQ(h100.fingerprint, a.inventory.devices[1].fingerprint);
  const CardKind& mxc = snap.kinds[by_card["b/metax0"]->kind];
  EXPECT_EQ(mxc.vendor, "metax");
  EXPECT_EQ(mxc.model, "MXC500");
  EXPECT_EQ(by_card["a/nvidia0"]->kind, by_card["a/nvidia1"]->kind);
  EXPECT_EQ(by_card["a/nvidia1"]->allocated_milli, 500);
  EXPECT_EQ(by_card["a/nvidia0"]->allocated_milli, 0);
  EXPECT_TRUE(by_card["b/metax1"]->schedulable);
}

}  // namespace
}  // namespace hetpool::daemon
