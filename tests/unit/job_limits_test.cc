// What a confined launch is held to (src/agent/job_limits): the job's ask or its cards' share of
// the node's memory, the plan's cores that the agent has, and only other cards' device files.
#include "src/agent/job_limits.h"

#include "gtest/gtest.h"

namespace hetpool::agent {
namespace {
namespace pb = hetpool::v1;

// Four cards; card i's device file is `files[i]` (real files every machine has).
pb::NodeInventory FourCards(const std::vector<std::vector<std::string>>& files) {
  pb::NodeInventory node;
  node.set_memory_mib(65536);
  for (int i = 0; i < 4; ++i) {
    pb::Device* d = node.add_devices();
    d->set_id("nvidia" + std::to_string(i));
    for (const auto& f : files[static_cast<size_t>(i)]) d->add_device_nodes(f);
  }
  return node;
}

pb::LaunchOrder OrderFor(std::vector<std::string> devices) {
  pb::LaunchOrder order;
  for (auto& d : devices) order.add_device_ids(std::move(d));
  return order;
}

TEST(JobLimits, MemoryIsTheAskOrTheCardsShareOfTheNode) {
  const pb::NodeInventory node = FourCards({{}, {}, {}, {}});
  pb::LaunchOrder order = OrderFor({"nvidia0"});
  JobLimits share = LimitsForLaunch(order, {&node, "", "", 100});
  EXPECT_EQ(share.memory_mib, 16384u);  // one card of four
  EXPECT_FALSE(share.memory_asked);
  EXPECT_EQ(share.pids, 100u);
  order.mutable_plan()->set_host_memory_mib(512);
  order.mutable_plan()->set_cpu_milli(1500);
  JobLimits asked = LimitsForLaunch(order, {&node, "", "", 0});
  EXPECT_EQ(asked.memory_mib, 512u);
  EXPECT_TRUE(asked.memory_asked);
  EXPECT_EQ(asked.cpu_milli, 1500);
  // A CPU job that asked for nothing has no limit of its own (the agent's parent cgroup holds it).
  EXPECT_EQ(LimitsForLaunch(OrderFor({}), {&node, "", "", 0}).memory_mib, 0u);
}

TEST(JobLimits, CoresAreThePlansThatTheAgentHasUnlessFewerThanTheAsk) {
  const pb::NodeInventory node = FourCards({{}, {}, {}, {}});
  pb::LaunchOrder order = OrderFor({"nvidia0"});
  order.mutable_plan()->set_cpus("0-7");
  order.mutable_plan()->set_numa_nodes("0");
  JobLimits near = LimitsForLaunch(order, {&node, "0-3,8-11", "0-1", 0});
  EXPECT_EQ(near.cpus, "0-3");
  EXPECT_EQ(near.mems, "0");
  order.mutable_plan()->set_cpu_milli(5000);  // five cores' time: four near cores would throttle it
  JobLimits wide = LimitsForLaunch(order, {&node, "0-3,8-11", "0-1", 0});
  EXPECT_EQ(wide.cpus, "");
  EXPECT_EQ(wide.mems, "");
}

TEST(JobLimits, OnlyTheOtherCardsDeviceFilesAreDenied) {
  // nvidia0 is /dev/null; nvidia1 /dev/zero; nvidia2 shares /dev/null with nvidia0 (as cards
  // share a control file); nvidia3 names a file that does not exist.
  const pb::NodeInventory node = FourCards({{"/dev/null"}, {"/dev/zero"}, {"/dev/null"}, {"/dev/no-such-card"}});
  JobLimits limits = LimitsForLaunch(OrderFor({"nvidia0"}), {&node, "", "", 0});
  ASSERT_EQ(limits.denied_devices.size(), 1u);
  EXPECT_EQ(limits.denied_devices[0].path, "/dev/zero");
  EXPECT_EQ(limits.denied_devices[0].type, 'c');
  EXPECT_EQ(limits.denied_devices[0].major, 1u);
  EXPECT_EQ(limits.denied_devices[0].minor, 5u);
}

}  // namespace
}  // namespace hetpool::agent
