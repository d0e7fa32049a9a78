// The one definition of "free" (src/daemon/state/claim_ledger.h), one row per kind of hold.
#include "src/daemon/state/claim_ledger.h"

#include "gtest/gtest.h"

namespace hetpool::daemon {
namespace {

Claim Holding(std::vector<std::string> devices, int32_t milli = 1000, uint64_t memory_mib = 0) {
  Claim c;
  c.device_ids = std::move(devices);
  c.device_milli = milli;
  c.device_memory_mib = memory_mib;
  return c;
}

TEST(ClaimLedger, HoldsAddUpPerDevice) {
  Claims claims;
  claims[{"job-1", 1}] = Holding({"g0", "g1"});
  claims[{"job-2", 1}] = Holding({"g2"}, 300, 20000);
  claims[{"job-3", 4}] = Holding({"g2"}, 500, 30000);
  claims[{"job-3", 3}] = Holding({"g2"}, 500, 30000);  // an older generation still being stopped
  const Holds holds = HoldsByDevice(claims);
  ASSERT_EQ(holds.size(), 3u);
  EXPECT_TRUE(holds.at("g0").whole);
  const DeviceHold& g2 = holds.at("g2");
  EXPECT_FALSE(g2.whole);
  EXPECT_EQ(g2.milli, 1300);
  EXPECT_EQ(g2.fractional_memory_mib, 80000u);
  EXPECT_EQ(g2.jobs, (std::vector<std::string>{"job-2", "job-3"}));  // each job once
  EXPECT_EQ(HoldOn(holds, "g9"), nullptr);
}

TEST(ClaimLedger, FreeAllocatedAndGivableAgree) {
  DeviceRecord card;
  card.memory_mib = 80000;
  DeviceRecord sick = card;
  sick.healthy = false;
  DeviceHold whole{{"a"}, 1000, 0, true};
  DeviceHold share{{"b"}, 300, 20000, false};
  DeviceHold full_shares{{"b", "c"}, 1200, 90000, false};  // over-committed: nothing is left
  struct Case {
    const char* what;
    const DeviceRecord* device;
    const DeviceHold* hold;
    bool schedulable;
    DeviceFree free;
    DeviceAllocated allocated;
    bool givable;
  };
  const Case cases[] = {
      {"nothing held", &card, nullptr, true, {true, 1000, 80000}, {0, 0}, true},
      {"whole claim", &card, &whole, true, {false, 0, 0}, {1000, 80000}, false},
      {"a share", &card, &share, true, {false, 700, 60000}, {300, 20000}, false},
      {"shares past the card", &card, &full_shares, true, {false, 0, 0}, {1000, 80000}, false},
      {"unhealthy", &sick, nullptr, true, {true, 1000, 80000}, {0, 0}, false},
      {"node drained or not ready", &card, nullptr, false, {true, 1000, 80000}, {0, 0}, false},
  };
  for (const Case& c : cases) {
    const DeviceFree free = FreeOf(*c.device, c.hold);
    EXPECT_EQ(free.whole, c.free.whole) << c.what;
    EXPECT_EQ(free.milli, c.free.milli) << c.what;
    EXPECT_EQ(free.memory_mib, c.free.memory_mib) << c.what;
    const DeviceAllocated allocated = AllocatedOf(*c.device, c.hold);
    EXPECT_EQ(allocated.milli, c.allocated.milli) << c.what;
    EXPECT_EQ(allocated.memory_mib, c.allocated.memory_mib) << c.what;
    EXPECT_EQ(GivableWhole(*c.device, c.hold, c.schedulable), c.givable) << c.what;
  }
}

TEST(ClaimLedger, HostCpuAndMemoryLeftAfterClaims) {
  NodeInventory inventory;
  inventory.cpus = 16;
  inventory.memory_mib = 65536;
  Claims claims;
  Claim cpu_job = Holding({});  // a CPU-only job holds no device, only host resources
  cpu_job.cpu_milli = 12000;
  cpu_job.host_memory_mib = 60000;
  claims[{"job-1", 1}] = cpu_job;
  HostFree free = HostFreeOf(inventory, claims);
  EXPECT_EQ(free.cpu_milli_total, 16000);
  EXPECT_EQ(free.cpu_milli, 4000);
  EXPECT_EQ(free.memory_total_mib, 65536u);
  EXPECT_EQ(free.memory_mib, 5536u);
  claims[{"job-2", 1}] = cpu_job;  // over-committed (say, re-adopted after a restart): nothing left
  free = HostFreeOf(inventory, claims);
  EXPECT_EQ(free.cpu_milli, 0);
  EXPECT_EQ(free.memory_mib, 0u);
  EXPECT_EQ(HostFreeOf(NodeInventory{}, claims).cpu_milli_total, 0);  // unreported: not limited
}

// A pass skips reading the claims of a node whose revision it has seen: any access that may
// change them must move it, reading must not, and no two Claims ever share a revision.
TEST(ClaimLedger, EveryAccessThatMayChangeClaimsMovesTheirRevision) {
  Claims claims;
  const uint64_t start = claims.revision();
  claims[{"job-1", 1}].device_ids = {"nvidia0"};
  uint64_t seen = claims.revision();
  EXPECT_NE(seen, start);
  const Claims& reading = claims;
  for (const auto& [key, claim] : reading) EXPECT_EQ(claim.device_ids.size(), 1u);
  EXPECT_TRUE(reading.contains({"job-1", 1}));
  EXPECT_NE(reading.find({"job-1", 1}), reading.end());
  EXPECT_EQ(claims.revision(), seen);  // read only

  auto moved = [&] {
    const bool did = claims.revision() != seen;
    seen = claims.revision();
    return did;
  };
  claims.find({"job-1", 1})->second.desired = false;  // a mutable iterator may write
  EXPECT_TRUE(moved());
  for (auto& [key, claim] : claims) claim.kill_reason = "stopping";
  EXPECT_TRUE(moved());
  claims.emplace(JobGen{"job-2", 1}, Claim{});
  EXPECT_TRUE(moved());
  claims.erase(JobGen{"job-2", 1});
  EXPECT_TRUE(moved());
  claims.EraseIf([](const auto& claim) { return !claim.second.desired; });
  EXPECT_TRUE(moved());
  EXPECT_TRUE(claims.empty());

  Claims other;  // another node's: never a revision this one had
  other[{"job-1", 1}];
  EXPECT_NE(other.revision(), claims.revision());
  EXPECT_GT(other.revision(), seen);
}

}  // namespace
}  // namespace hetpool::daemon
