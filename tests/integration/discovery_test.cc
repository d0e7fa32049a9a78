// Real discovery end to end: an agent in auto mode loads the fake vendor libraries through dlopen
// (HETPOOL_VENDOR_LIB_PATH), registers an 8 x H100 HGX node with its NVSwitch fabric and
// fingerprints; a card hot-removed under it turns unhealthy in the daemon within one refresh.
#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {
namespace {

class DiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_ = fixture_dir_.path() + "/dgx-h100.json";
    std::filesystem::copy_file(std::string(HETPOOL_SOURCE_DIR) + "/tests/fakes/fixtures/dgx-h100.json", fixture_);
  }
  TestCluster::Options Options() const {
    TestCluster::Options options;
    options.agents = {{"hgx-01", "", {"auto"},
                       {{"HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_LIB_DIR}, {"HETPOOL_FAKE_FIXTURE", fixture_}}}};
    return options;
  }
  TempDir fixture_dir_;
  std::string fixture_;
};

TEST_F(DiscoveryTest, AgentDiscoversCardsAndReportsAHotRemovedOneWithinOneRefresh) {
  TestCluster cluster(Options());
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  pb::GetNodeRequest get;
  get.set_name("hgx-01");
  pb::Node node;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(cluster.cluster().GetNode(&ctx, get, &node).ok());
  }
  ASSERT_EQ(node.inventory().devices_size(), 8) << cluster.AgentLog(0);
  EXPECT_FALSE(node.inventory().simulated());
  EXPECT_EQ(node.inventory().backend(), "nvml");
  const auto& d0 = node.inventory().devices(0);
  EXPECT_EQ(d0.model(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d0.architecture(), "sm_90");
  EXPECT_EQ(d0.capability().collective(), "NCCL");
  EXPECT_EQ(d0.capability().bandwidth_gbps(), 3350);
  int nvlink_peers = 0;
  for (const auto& l : d0.links()) nvlink_peers += l.kind() == pb::LINK_KIND_NVLINK && l.count() == 18;
  EXPECT_EQ(nvlink_peers, 7);
  // The other vendor libraries are there too but found no driver: one log line each.
  const std::string agent_log = cluster.AgentLog(0);
  for (const char* backend : {"cndev", "mxsml", "levelzero"}) {
    EXPECT_NE(agent_log.find(std::string(backend) + " backend disabled"), std::string::npos) << agent_log;
  }

  pb::ListFingerprintsResponse classes;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(cluster.cluster().ListFingerprints(&ctx, {}, &classes).ok());
  }
  ASSERT_EQ(classes.classes_size(), 1);
  EXPECT_EQ(classes.classes(0).total(), 8);
  EXPECT_EQ(classes.classes(0).free(), 8);
  EXPECT_EQ(classes.classes(0).fingerprint(), d0.fingerprint());

  // Card 3 falls off the bus.
  nlohmann::json fixture = nlohmann::json::parse(std::ifstream(fixture_));
  fixture["devices"][3]["removed"] = true;
  std::ofstream(fixture_ + ".tmp") << fixture.dump();
  const absl::Time removed_at = absl::Now();
  std::filesystem::rename(fixture_ + ".tmp", fixture_);
  bool unhealthy = false;
  absl::Duration took;
  while (!unhealthy && absl::Now() - removed_at < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(50));
    grpc::ClientContext ctx;
    if (!cluster.cluster().GetNode(&ctx, get, &node).ok()) continue;
    for (const auto& d : node.inventory().devices()) {
      if (d.id() == "nvidia3" && !d.healthy()) unhealthy = true;
    }
    took = absl::Now() - removed_at;
  }
  ASSERT_TRUE(unhealthy) << cluster.AgentLog(0);
  // One refresh is 500 ms here; allow the heartbeat and scheduling slack of a loaded CI machine.
  EXPECT_LT(took, absl::Seconds(3)) << absl::FormatDuration(took);
  ASSERT_EQ(node.inventory().devices_size(), 8);

  // Eight cards can no longer be had: the job waits, saying why.
  auto spec = cluster.TrainSpec(1, 8, {});
  auto job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto waiting = cluster.WaitFor(job->id(), [](const pb::Job& j) { return j.reason() == "Unschedulable"; },
                                 absl::Seconds(10));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_NE(waiting->message().find("0 node(s) have them free now"), std::string::npos) << waiting->message();

  // A job that needs what an H100 lacks is refused at submission, with the reason.
  spec.set_devices_per_node(1);
  spec.mutable_requirements()->add_precisions("int4");
  auto refused = cluster.Submit(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(refused.status().message()).find("lacks int4"), std::string::npos) << refused.status();
}

TEST_F(DiscoveryTest, SixteenCardJobLandsOnTwoNodesOfOneRack) {
  TestCluster::Options options;
  const std::vector<std::pair<std::string, std::string>> env = {{"HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_LIB_DIR},
                                                                {"HETPOOL_FAKE_FIXTURE", fixture_}};
  options.agents = {{"hgx-01", "", {"nvml"}, env, {"rack=r1"}},
                    {"hgx-02", "", {"nvml"}, env, {"rack=r2"}},
                    {"hgx-03", "", {"nvml"}, env, {"rack=r2"}}};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  std::string out;
  ASSERT_EQ(cluster.RunCli({"nodes"}, &out), 0) << out;
  EXPECT_NE(out.find("rack=r2"), std::string::npos) << out;
  // A 2 x 8 job that runs long enough to inspect (the fake cards are not simulated: /bin/sleep
  // stands in for the trainer, the placement is what is checked).
  pb::JobSpec spec;
  spec.set_user("tester");
  spec.add_command("/bin/sleep");
  spec.add_command("30");
  spec.set_working_dir("/tmp");
  spec.set_nnodes(2);
  spec.set_devices_per_node(8);
  (*spec.mutable_env())["HPTEST_RUN_MARK"] = cluster.dir();
  auto job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto placed = cluster.WaitFor(job->id(), [](const pb::Job& j) { return j.placement_size() == 2; }, absl::Seconds(20));
  ASSERT_TRUE(placed.ok()) << placed.status();
  std::set<std::string> nodes = {placed->placement(0).node(), placed->placement(1).node()};
  EXPECT_EQ(nodes, (std::set<std::string>{"hgx-02", "hgx-03"}));
  EXPECT_EQ(placed->placement(0).link_score(), 118);
}

TEST_F(DiscoveryTest, PrintInventoryGoesThroughTheVendorLibraries) {
  const std::string out = fixture_dir_.path() + "/inventory.json";
  auto agent = ChildProcess::Spawn({HETPOOL_AGENT_BIN, "--print-inventory"}, out,
                                   {{"HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_LIB_DIR}, {"HETPOOL_FAKE_FIXTURE", fixture_}});
  ASSERT_TRUE(agent.ok());
  auto status = (*agent)->Wait(absl::Seconds(20));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto json = nlohmann::json::parse(text.substr(text.find('{')), nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << text;
  ASSERT_EQ(json["devices"].size(), 8u);
  EXPECT_EQ(json["devices"][0]["capability"]["isa"], "cuda");
  EXPECT_EQ(json["devices"][0]["fingerprint"], json["devices"][7]["fingerprint"]);
}

}  // namespace
}  // namespace hetpool::testing
