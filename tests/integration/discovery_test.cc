// Real discovery end to end: an agent in auto mode loads the fake vendor libraries through dlopen
// (HETPOOL_VENDOR_LIB_PATH), registers an 8 x H100 HGX node with its NVSwitch fabric and
// fingerprints; a card hot-removed under it turns unhealthy in the daemon within one refresh.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"

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
    options.agents = {{"hgx-01",
                       "",
                       {"auto"},
                       {{"HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_LIB_DIR}, {"HETPOOL_FAKE_FIXTURE", fixture_}}}};
    return options;
  }
  // Makes the fake NVML list these processes (pid, MiB) on card `index`, as a real driver
  // lists a process holding memory on it; an empty list clears the card.
  void HoldCard(int index, const std::vector<std::pair<pid_t, int>>& processes) {
    nlohmann::json fixture = nlohmann::json::parse(std::ifstream(fixture_));
    fixture["devices"][index]["processes"] = nlohmann::json::array();
    for (const auto& [pid, mib] : processes) {
      fixture["devices"][index]["processes"].push_back({{"pid", pid}, {"used_memory_mib", mib}});
    }
    std::ofstream(fixture_ + ".tmp") << fixture.dump();
    std::filesystem::rename(fixture_ + ".tmp", fixture_);
  }
  // The card as the daemon has it, once `done` holds (or the last seen after 20 s).
  static pb::Device WaitForCard(TestCluster& cluster, const std::string& id,
                                const std::function<bool(const pb::Device&)>& done) {
    pb::Device card;
    for (const absl::Time deadline = absl::Now() + absl::Seconds(20); absl::Now() < deadline;
         absl::SleepFor(absl::Milliseconds(50))) {
      pb::GetNodeRequest get;
      get.set_name("hgx-01");
      pb::Node node;
      grpc::ClientContext ctx;
      if (!cluster.cluster().GetNode(&ctx, get, &node).ok()) continue;
      for (const auto& d : node.inventory().devices()) {
        if (d.id() == id) card = d;
      }
      if (done(card)) break;
    }
    return card;
  }
  // /bin/sh -c `script` on `devices` cards of one node (the fake cards run no kernels).
  pb::JobSpec ShellOnCards(int devices, const std::string& script) const {
    pb::JobSpec spec;
    spec.set_user("tester");
    spec.add_command("/bin/sh");
    spec.add_command("-c");
    spec.add_command(script);
    spec.set_working_dir("/tmp");
    spec.set_nnodes(1);
    spec.set_devices_per_node(devices);
    return spec;
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
  auto waiting = cluster.WaitFor(
      job->id(), [](const pb::Job& j) { return j.reason() == "Unschedulable"; }, absl::Seconds(10));
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
  auto placed = cluster.WaitFor(
      job->id(), [](const pb::Job& j) { return j.placement_size() == 2; }, absl::Seconds(20));
  ASSERT_TRUE(placed.ok()) << placed.status();
  std::set<std::string> nodes = {placed->placement(0).node(), placed->placement(1).node()};
  EXPECT_EQ(nodes, (std::set<std::string>{"hgx-02", "hgx-03"}));
  EXPECT_EQ(placed->placement(0).link_score(), 118);
}

// Issue 47, item 2: a process of none of the node's jobs (an operator's, say) holding a card
// makes it dirty: `devices` and `nodes` say who holds it and how much, nothing is placed on it,
// and once the process is gone the card is used again.
TEST_F(DiscoveryTest, AProcessOfNoJobHoldingACardKeepsJobsOffItUntilItIsGone) {
  TestCluster cluster(Options());
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  auto stranger = ChildProcess::Spawn({"/bin/sleep", "300"}, fixture_dir_.path() + "/stranger.out", {});
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  const pid_t pid = (*stranger)->pid();
  HoldCard(5, {{pid, 2658}});
  const pb::Device dirty = WaitForCard(cluster, "nvidia5", [](const pb::Device& d) { return !d.dirty().empty(); });
  const std::string held = absl::StrCat("pid ", pid, " (uid ", geteuid(), ", sleep) holds 2658 MiB");
  ASSERT_EQ(dirty.dirty(), held) << cluster.AgentLog(0);
  ASSERT_EQ(dirty.processes_size(), 1);
  EXPECT_EQ(dirty.processes(0).owner(), "");
  std::string out;
  ASSERT_EQ(cluster.RunCli({"devices"}, &out), 0) << out;
  EXPECT_NE(out.find("dirty: " + held), std::string::npos) << out;
  ASSERT_EQ(cluster.RunCli({"nodes"}, &out), 0) << out;
  EXPECT_NE(out.find("hgx-01 nvidia5 is dirty: " + held), std::string::npos) << out;

  // Eight cards are not to be had while one is dirty: the job waits, saying why.
  auto job = cluster.Submit(ShellOnCards(8, "exec sleep 30"));
  ASSERT_TRUE(job.ok()) << job.status();
  auto waiting = cluster.WaitFor(
      job->id(), [](const pb::Job& j) { return j.reason() == "Unschedulable"; }, absl::Seconds(20));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->placement_size(), 0);

  // The process ends and the driver no longer lists it: the card is clean and the job placed.
  (*stranger)->Signal(SIGKILL);
  ASSERT_TRUE((*stranger)->Wait(absl::Seconds(10)).has_value());
  HoldCard(5, {});
  EXPECT_EQ(WaitForCard(cluster, "nvidia5", [](const pb::Device& d) { return d.dirty().empty(); }).dirty(), "");
  auto placed = cluster.WaitFor(
      job->id(), [](const pb::Job& j) { return j.placement_size() == 1; }, absl::Seconds(20));
  ASSERT_TRUE(placed.ok()) << placed.status();
}

// Issue 47, item 2: a process the job started that left its process group (setsid) and, with
// confinement off, its cgroup too, still holding the card when the job ends, is the job's by its
// account: while the job runs the card is not dirty; at its end the agent kills it and the job's
// events and `get` name it.
TEST_F(DiscoveryTest, WhatAFinishedJobLeftHoldingItsCardIsKilledAndNamedInItsEvents) {
  if (geteuid() != 0) GTEST_SKIP() << "jobs run under accounts of their own only with a root agent";
  TestCluster::Options options = Options();
  TestCluster cluster(options);
  // The job runs as a uid of its own (its account is what owns the escaped process), reaching
  // its run directory under the agent's work dir and a shared directory of the test's.
  std::filesystem::permissions(cluster.dir(), std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                                  std::filesystem::perms::others_exec);
  cluster.mutable_options().agents[0].job_dirs = cluster.dir();
  cluster.mutable_options().agents[0].args = {"--run-as", "dynamic", "--confine", "off"};
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  const std::string shared = cluster.dir() + "/shared";
  std::filesystem::create_directories(shared);
  std::filesystem::permissions(shared, std::filesystem::perms::all);
  pb::JobSpec spec = ShellOnCards(1, absl::StrCat("setsid /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ",
                                                  shared, "/pid; while [ ! -e ", shared, "/go ]; do sleep 0.1; done"));
  spec.set_working_dir(shared);
  auto job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto placed = cluster.WaitFor(
      job->id(), [](const pb::Job& j) { return j.placement_size() == 1; }, absl::Seconds(20));
  ASSERT_TRUE(placed.ok()) << placed.status();
  const std::string card = placed->placement(0).device_ids(0);
  pid_t escaped = 0;
  Eventually(
      [&] {
        std::ifstream(shared + "/pid") >> escaped;
        return escaped != 0;
      },
      absl::Seconds(30), absl::Milliseconds(50));
  ASSERT_GT(escaped, 0) << cluster.AgentLog(0);
  HoldCard(std::stoi(card.substr(std::string("nvidia").size())), {{escaped, 2048}});
  const std::string owner = absl::StrCat(job->id(), " g1");
  const pb::Device held = WaitForCard(
      cluster, card, [&](const pb::Device& d) { return d.processes_size() == 1 && d.processes(0).owner() == owner; });
  ASSERT_EQ(held.processes_size(), 1) << cluster.AgentLog(0);
  EXPECT_EQ(held.processes(0).owner(), owner);
  EXPECT_EQ(held.dirty(), "");  // the running job's own

  std::ofstream(shared + "/go").close();
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(30));
  ASSERT_TRUE(done.ok()) << done.status() << cluster.AgentLog(0);
  std::string event;
  for (const auto& e : done->events()) {
    if (e.reason() == "CardLeftoversKilled") event = e.message();
  }
  EXPECT_NE(event.find(absl::StrCat("pid ", escaped, " (uid ")), std::string::npos) << event;
  EXPECT_NE(event.find("sleep) holds 2048 MiB of " + card), std::string::npos) << event;
  const bool gone = Eventually([&] { return !ProcessAlive(escaped); }, absl::Seconds(10), absl::Milliseconds(50));
  EXPECT_TRUE(gone) << "pid " << escaped << " outlived its job";
  std::string out;
  ASSERT_EQ(cluster.RunCli({"get", job->id()}, &out), 0) << out;
  EXPECT_NE(out.find(absl::StrCat("left on card: on hgx-01, killed: pid ", escaped)), std::string::npos) << out;
  HoldCard(std::stoi(card.substr(std::string("nvidia").size())), {});
}

TEST_F(DiscoveryTest, PrintInventoryGoesThroughTheVendorLibraries) {
  const std::string out = fixture_dir_.path() + "/inventory.json";
  auto agent =
      ChildProcess::Spawn({HETPOOL_AGENT_BIN, "--print-inventory"}, out,
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
