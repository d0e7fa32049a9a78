// Hardware faults (issue 61): a card that fails every job placed on it is no black hole. Its
// failures are read as the hardware's, each failed job resumes on another card without spending
// a restart, and the card is quarantined after the rule's two failures, with the evidence.
#include <cctype>
#include <filesystem>
#include <optional>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/common/convert.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/eventually.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

// One agent named `name` discovering through the fake vendor libraries over `fixture_path`.
TestCluster::Options FakeVendorAgent(const std::string& name, const std::string& fixture_path) {
  TestCluster::Options options;
  options.agents = {{name,
                     "",
                     {"auto"},
                     {{"HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_LIB_DIR}, {"HETPOOL_FAKE_FIXTURE", fixture_path}}}};
  return options;
}

// One agent of the example pool, running `program` as its health check every second.
TestCluster::Options WithHealthCheck(const std::string& program) {
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);
  options.agents[0].args = {"--health-check", program, "--health-interval", "1s"};
  return options;
}

TEST(HardwareFaults, ABadCardTakesAtMostTwoFailuresAndEveryJobSucceeds) {
  TestCluster::Options options;
  // One node of four NVIDIA cards: each run of the script reads its card from CUDA_VISIBLE_DEVICES.
  TempDir dir;
  const std::string inventory = dir.path() + "/node-a.json";
  const std::string h100 = R"({"vendor": "nvidia", "model": "H100-SXM", "memory_mib": 81559, "architecture": "sm_90"})";
  std::ofstream(inventory) << R"({"hostname": "sim-node-a", "cpus": 64, "memory_mib": 524288, "devices": [)" << h100
                           << "," << h100 << "," << h100 << "," << h100 << "]}";
  options.agents.push_back({.name = "node-a", .inventory_file = inventory});
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_TRUE(cluster.WaitNodesReady(1, absl::Seconds(60)).ok());
  // Two of the four cards held by a long job, as in the issue's pool.
  auto long_job = cluster.Submit(cluster.TrainSpec(1, 2, {"--steps", "100000", "--step-sleep", "0.1"}));
  ASSERT_TRUE(long_job.ok()) << long_job.status();
  ASSERT_TRUE(cluster.WaitForState(long_job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(120)).ok());

  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    pb::JobSpec spec = cluster.TrainSpec(1, 1, {});
    spec.mutable_python()->set_script("tests/integration/scripts/card_with_ecc_errors.py");
    spec.set_max_restarts(0);
    auto job = cluster.Submit(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  int hardware_failures = 0;
  std::set<std::string> avoided;
  for (const std::string& id : ids) {
    auto done = cluster.WaitForState(id, pb::JOB_STATE_SUCCEEDED, absl::Seconds(240));
    ASSERT_TRUE(done.ok()) << id << ": " << done.status() << "\n" << cluster.DaemonLog();
    EXPECT_EQ(done->restart_count(), 0) << id;  // max_restarts untouched
    hardware_failures += done->hardware_requeues();
    for (const auto& card : done->avoided_cards()) avoided.insert(card);
  }
  // Eight jobs wait while the bad card is free, so a second one lands there: the rule's two
  // failures, both on that card; then it is out of service.
  EXPECT_EQ(hardware_failures, 2);
  ASSERT_EQ(avoided.size(), 1u);
  const std::string bad_device = avoided.begin()->substr(avoided.begin()->find('/') + 1);
  std::string out;
  ASSERT_EQ(cluster.RunCli({"devices", "--quarantined"}, &out), 0) << out;
  EXPECT_NE(out.find(bad_device), std::string::npos) << out;
  EXPECT_NE(out.find("uncorrectable ECC error encountered"), std::string::npos) << out;
  // Returned after repair (an operator's act): placeable again.
  ASSERT_EQ(cluster.RunCli({"return-card", "node-a", bad_device}, &out), 0) << out;
  ASSERT_EQ(cluster.RunCli({"devices", "--quarantined"}, &out), 0) << out;
  EXPECT_EQ(out.find(bad_device), std::string::npos) << out;
}

// Through the fake NVML's real ABI: an Xid 79 event on one card quarantines that card within 10 s
// while jobs run on its neighbours, and its job is requeued on another card; an Xid 13 (the
// application's) on another card's job changes nothing.
TEST(HardwareFaults, AnXidEventQuarantinesItsCardAndRequeuesItsJobElsewhere) {
  TempDir dir;
  const std::string fixture_path = dir.path() + "/dgx-h100.json";
  std::filesystem::copy_file(std::string(HETPOOL_SOURCE_DIR) + "/tests/fakes/fixtures/dgx-h100.json", fixture_path);
  TestCluster::Options options = FakeVendorAgent("hgx-01", fixture_path);
  const int metrics_port = FreeTcpPort();
  options.daemon_args = {"--metrics-listen", absl::StrCat("127.0.0.1:", metrics_port)};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  ASSERT_TRUE(cluster.WaitNodesReady(1, absl::Seconds(60)).ok());
  auto one_card = [] {
    pb::JobSpec spec;
    spec.set_user("tester");
    for (const char* arg : {"/bin/sh", "-c", "exec sleep 600"}) spec.add_command(arg);
    spec.set_working_dir("/tmp");
    spec.set_nnodes(1);
    spec.set_devices_per_node(1);
    return spec;
  };
  std::vector<pb::Job> running;
  for (int i = 0; i < 3; ++i) {
    auto job = cluster.Submit(one_card());
    ASSERT_TRUE(job.ok()) << job.status();
    auto started = cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60));
    ASSERT_TRUE(started.ok()) << started.status() << cluster.AgentLog(0);
    running.push_back(*started);
  }
  auto index_of = [](const pb::Job& job) { return std::stoi(job.placement(0).device_ids(0).substr(6)); };  // nvidiaN
  const int failing = index_of(running[0]), faulty_app = index_of(running[1]);
  nlohmann::json fixture = nlohmann::json::parse(std::ifstream(fixture_path));
  fixture["devices"][failing]["xid_events"] = {79};
  fixture["devices"][faulty_app]["xid_events"] = {13};
  std::ofstream(fixture_path + ".tmp") << fixture.dump();
  const absl::Time injected = absl::Now();
  std::filesystem::rename(fixture_path + ".tmp", fixture_path);

  const std::string card = running[0].placement(0).device_ids(0);
  auto moved = cluster.WaitFor(
      running[0].id(),
      [&](const pb::Job& j) { return j.hardware_requeues() == 1 && j.state() == pb::JOB_STATE_RUNNING; },
      absl::Seconds(60));
  ASSERT_TRUE(moved.ok()) << moved.status() << cluster.DaemonLog();
  EXPECT_NE(moved->placement(0).device_ids(0), card);  // on another card
  EXPECT_EQ(moved->restart_count(), 0);
  ASSERT_EQ(moved->avoided_cards_size(), 1);
  EXPECT_EQ(moved->avoided_cards(0), "hgx-01/" + card);
  std::string out;
  ASSERT_EQ(cluster.RunCli({"devices", "--quarantined"}, &out), 0) << out;
  EXPECT_NE(out.find(card), std::string::npos) << out;
  EXPECT_NE(out.find("Xid 79: GPU has fallen off the bus"), std::string::npos) << out;
  // Quarantined within 10 s of the event (its stamp is the daemon's; both clocks are this host's).
  pb::ListDevicesRequest req;
  pb::ListDevicesResponse devices;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster.cluster().ListDevices(&ctx, req, &devices).ok());
  for (const auto& v : devices.devices()) {
    if (v.device().id() != card) continue;
    ASSERT_TRUE(v.has_quarantine());
    EXPECT_LT(FromProtoTime(v.quarantine().since()) - injected, absl::Seconds(10));
  }
  // The metric an alert rule reads (deploy/monitoring/hetpool-alerts.yml): which card, since when, why.
  const std::string metrics = Scrape(metrics_port);
  const std::string series = absl::StrCat("hetpool_card_quarantined_since_seconds{device=\"", card,
                                          "\",node=\"hgx-01\",reason=\"fatal health signal (nvml: Xid 79: GPU "
                                          "has fallen off the bus)\"}");
  EXPECT_GT(Sample(metrics, series), 0) << metrics;
  // The neighbours ran on: an application's Xid is not held against its card.
  for (size_t i = 1; i < running.size(); ++i) {
    auto now = cluster.Get(running[i].id());
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->state(), pb::JOB_STATE_RUNNING) << now->DebugString();
    EXPECT_EQ(now->generation(), running[i].generation());
    EXPECT_EQ(now->hardware_requeues(), 0);
  }
  EXPECT_EQ(out.find(running[1].placement(0).device_ids(0) + " "), std::string::npos) << out;
}

// A health-check program that exits 1 takes its node out of service, its last line the reason;
// once it passes again the node takes work (Slurm's HealthCheckProgram, issue 61 item 4).
TEST(HardwareFaults, AFailingHealthCheckTakesItsNodeOutOfServiceUntilItPasses) {
  TempDir dir;
  const std::string verdict = dir.path() + "/verdict", program = dir.path() + "/check.sh";
  std::ofstream(verdict) << "1";
  std::ofstream(program) << "#!/bin/sh\necho checking the node\necho 'nvidia2: retired pages pending'\nexit $(cat "
                         << verdict << ")\n";
  TestCluster cluster(WithHealthCheck(program));
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  auto node_fault = [&] {
    pb::ListNodesResponse nodes;
    grpc::ClientContext ctx;
    if (!cluster.cluster().ListNodes(&ctx, pb::ListNodesRequest(), &nodes).ok() || nodes.nodes_size() != 1)
      return std::string("?");
    return nodes.nodes(0).fault();
  };
  ASSERT_TRUE(Eventually([&] { return node_fault() != "" && node_fault() != "?"; }, absl::Seconds(30)))
      << cluster.AgentLog(0);
  EXPECT_EQ(node_fault(), "health check " + program + " failed (exit 1): nvidia2: retired pages pending");
  auto job = cluster.Submit(cluster.ShellSpec("echo ran"));
  ASSERT_TRUE(job.ok()) << job.status();
  // The scheduler looks and places nothing there: the job waits, saying so.
  auto held = cluster.WaitFor(
      job->id(), [](const pb::Job& j) { return j.reason() == "Unschedulable"; }, absl::Seconds(30));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->state(), pb::JOB_STATE_PENDING);
  std::ofstream(verdict) << "0";
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status() << cluster.AgentLog(0);
  EXPECT_EQ(node_fault(), "");
}

// A health check whose last line names one of the node's cards blames that card alone: it is
// quarantined with the line as its evidence, and the node takes work on its other cards.
TEST(HardwareFaults, AHealthCheckThatNamesACardQuarantinesTheCardNotTheNode) {
  TempDir dir;
  const std::string program = dir.path() + "/check.sh";
  std::ofstream(program) << "#!/bin/sh\necho 'nvidia1: row remapping failed'\nexit 1\n";
  TestCluster cluster(WithHealthCheck(program));
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  auto quarantine = [&]() -> std::optional<pb::CardQuarantine> {
    pb::ListDevicesResponse devices;
    grpc::ClientContext ctx;
    if (!cluster.cluster().ListDevices(&ctx, pb::ListDevicesRequest(), &devices).ok()) return std::nullopt;
    for (const auto& v : devices.devices()) {
      if (v.device().id() == "nvidia1" && v.has_quarantine()) return v.quarantine();
    }
    return std::nullopt;
  };
  ASSERT_TRUE(Eventually([&] { return quarantine().has_value(); }, absl::Seconds(30))) << cluster.AgentLog(0);
  EXPECT_EQ(quarantine()->reason(),
            absl::StrCat("fatal health signal (health-check: ", program, ": nvidia1: row remapping failed)"));
  pb::ListNodesResponse nodes;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster.cluster().ListNodes(&ctx, pb::ListNodesRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).fault(), "");  // the node stays in service
  pb::JobSpec spec = cluster.ShellSpec("echo ran");
  spec.set_devices_per_node(1);
  auto job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status() << cluster.AgentLog(0);
  EXPECT_NE(done->placement(0).device_ids(0), "nvidia1");
}

// Pre-flight (hetpool-agent --preflight): the node's check runs before a job's first launch there.
// A failure keeps the job from starting on the node and sends it back to the queue as the node's
// fault (no restart spent); once the check passes again the job runs, its events saying so.
TEST(HardwareFaults, AFailedPreflightSendsTheJobBackAsTheNodesFault) {
  TempDir dir;
  const std::string fail_once = dir.path() + "/fail-once", program = dir.path() + "/check.sh";
  // Fails the first pre-flight after `fail_once` appears; passes its periodic runs and the rest.
  std::ofstream(program) << "#!/bin/sh\nif [ \"$HETPOOL_HEALTH_CHECK\" = preflight ] && rm " << fail_once
                         << " 2>/dev/null; then echo 'fan 3 stopped'; exit 1; fi\necho fine\n";
  TestCluster::Options options = WithHealthCheck(program);
  options.agents[0].args = {"--health-check", program, "--health-interval", "2s", "--preflight"};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  ASSERT_TRUE(cluster.WaitNodesReady(1, absl::Seconds(60)).ok());
  std::ofstream(fail_once) << "";
  auto job = cluster.Submit(cluster.ShellSpec("echo ran"));
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status() << cluster.AgentLog(0);
  EXPECT_FALSE(std::filesystem::exists(fail_once));  // the failing pre-flight ran
  EXPECT_EQ(done->restart_count(), 0);
  EXPECT_EQ(done->hardware_requeues(), 1);
  std::string failed, started;
  for (const auto& e : done->events()) {
    if (e.reason() == "HardwareFailure") failed = e.message();
    if (e.reason() == "NodeStarted") started = e.message();
  }
  EXPECT_NE(failed.find("pre-flight health check failed"), std::string::npos) << failed;
  EXPECT_NE(failed.find("fan 3 stopped"), std::string::npos) << failed;
  EXPECT_NE(started.find("pre-flight health check passed in "), std::string::npos) << started;
}

// A generation that fails in its first seconds, by its own code, may have met a bad card before
// any signal says so: its next generation is offered other cards first (Job.shunned_cards), and
// the same card only when nothing else fits.
TEST(HardwareFaults, AJobThatFailedEarlyOnACardIsRestartedOnAnotherFirst) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);  // node-a: two NVIDIA cards
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_TRUE(cluster.WaitNodesReady(1, absl::Seconds(60)).ok());
  auto fails_first = [&] {
    pb::JobSpec spec = cluster.ShellSpec(
        "sleep 1; if [ \"$HETPOOL_RESTART_COUNT\" = 0 ]; then echo 'CUDA error: an illegal memory access' >&2; "
        "exit 1; fi; echo ran");
    spec.mutable_requirements()->add_vendors("nvidia");
    spec.set_max_restarts(1);
    return spec;
  };
  auto card_of_generation_1 = [](const pb::Job& job) {
    for (const auto& e : job.events()) {
      if (e.reason() == "Scheduled" && e.message().find("generation 1 on ") != std::string::npos) {
        return e.message().substr(e.message().find(" on ") + 4);
      }
    }
    return std::string();
  };
  auto job = cluster.Submit(fails_first());
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->restart_count(), 1);
  const std::string first = card_of_generation_1(*done);  // "node-a[nvidia0]"
  ASSERT_EQ(done->shunned_cards_size(), 1) << done->DebugString();
  EXPECT_EQ(first, absl::StrCat("node-a[", done->shunned_cards(0).substr(7), "]"));
  EXPECT_NE(done->placement(0).device_ids(0), done->shunned_cards(0).substr(7));  // on the other card

  // With the other card taken, the shunned one is offered after all: the job still runs, there.
  pb::JobSpec holder = cluster.ShellSpec("exec sleep 600");
  holder.mutable_requirements()->add_vendors("nvidia");
  auto held = cluster.Submit(holder);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(cluster.WaitForState(held->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  auto again = cluster.Submit(fails_first());
  ASSERT_TRUE(again.ok()) << again.status();
  auto ran = cluster.WaitForState(again->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->restart_count(), 1);
  ASSERT_EQ(ran->shunned_cards_size(), 1);
  EXPECT_EQ(ran->placement(0).device_ids(0), ran->shunned_cards(0).substr(7));
}

// A degraded card (here its PCIe link trained at x8 of x16, through the fake NVML's ABI) runs
// jobs after every well card: seven one-card jobs take the seven well cards, the eighth takes it
// and says so in `get`; `devices` shows why.
TEST(HardwareFaults, ADegradedCardIsPlacedLastAndNamedOnItsJob) {
  TempDir dir;
  nlohmann::json fixture =
      nlohmann::json::parse(std::ifstream(std::string(HETPOOL_SOURCE_DIR) + "/tests/fakes/fixtures/dgx-h100.json"));
  fixture["devices"][3]["pcie_width"] = 8;
  const std::string fixture_path = dir.path() + "/dgx-h100.json";
  std::ofstream(fixture_path) << fixture.dump();
  TestCluster cluster(FakeVendorAgent("hgx-01", fixture_path));
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  ASSERT_TRUE(cluster.WaitNodesReady(1, absl::Seconds(60)).ok());
  std::set<std::string> cards;
  for (int i = 0; i < 7; ++i) {
    auto job = cluster.Submit(cluster.ShellSpec("exec sleep 600"));
    ASSERT_TRUE(job.ok()) << job.status();
    auto running = cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60));
    ASSERT_TRUE(running.ok()) << running.status();
    cards.insert(running->placement(0).device_ids(0));
  }
  EXPECT_EQ(cards.count("nvidia3"), 0u);
  auto last = cluster.Submit(cluster.ShellSpec("exec sleep 600"));
  ASSERT_TRUE(last.ok()) << last.status();
  auto running = cluster.WaitForState(last->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->placement(0).device_ids(0), "nvidia3");
  std::string out;
  ASSERT_EQ(cluster.RunCli({"get", last->id()}, &out), 0) << out;
  EXPECT_NE(out.find("degraded:    on hgx-01: nvidia3: PCIe link x8 of x16 (Gen5 of Gen5) (nvml)"), std::string::npos)
      << out;
  ASSERT_EQ(cluster.RunCli({"devices"}, &out), 0) << out;
  EXPECT_NE(out.find("degraded: PCIe link x8 of x16"), std::string::npos) << out;
}

// Each vendor's own signal read at the agent's inventory pass (NVML's counters, CNDev's health
// state, MXSML's ECC counts, Level Zero's memory health, each through its fake library's ABI)
// quarantines its card within 10 s while jobs run on its neighbours, and the card's job is
// requeued on another card.
struct FatalSignalCase {
  const char* fixture;
  const char* field;
  nlohmann::json value;
  const char* reason;  // the quarantine's
};

class FatalSignal : public ::testing::TestWithParam<FatalSignalCase> {};

TEST_P(FatalSignal, QuarantinesItsCardAndRequeuesItsJobElsewhere) {
  const FatalSignalCase& c = GetParam();
  TempDir dir;
  const std::string fixture_path = dir.path() + "/fixture.json";
  std::filesystem::copy_file(absl::StrCat(HETPOOL_SOURCE_DIR, "/tests/fakes/fixtures/", c.fixture, ".json"),
                             fixture_path);
  TestCluster cluster(FakeVendorAgent("node-1", fixture_path));
  ASSERT_TRUE(cluster.Start().ok()) << cluster.AgentLog(0);
  ASSERT_TRUE(cluster.WaitNodesReady(1, absl::Seconds(60)).ok());
  std::vector<pb::Job> running;
  for (int i = 0; i < 2; ++i) {
    auto job = cluster.Submit(cluster.ShellSpec("exec sleep 600"));
    ASSERT_TRUE(job.ok()) << job.status();
    auto started = cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60));
    ASSERT_TRUE(started.ok()) << started.status() << cluster.AgentLog(0);
    running.push_back(*started);
  }
  // The device id ends in the vendor's enumeration index, which is the fixture's (nothing removed).
  const std::string card = running[0].placement(0).device_ids(0);
  const int failing = std::stoi(card.substr(card.find_first_of("0123456789")));
  nlohmann::json fixture = nlohmann::json::parse(std::ifstream(fixture_path));
  fixture["devices"][failing][c.field] = c.value;
  std::ofstream(fixture_path + ".tmp") << fixture.dump();
  const absl::Time injected = absl::Now();
  std::filesystem::rename(fixture_path + ".tmp", fixture_path);

  auto moved = cluster.WaitFor(
      running[0].id(),
      [&](const pb::Job& j) { return j.hardware_requeues() == 1 && j.state() == pb::JOB_STATE_RUNNING; },
      absl::Seconds(60));
  ASSERT_TRUE(moved.ok()) << moved.status() << cluster.DaemonLog();
  EXPECT_NE(moved->placement(0).device_ids(0), card);
  EXPECT_EQ(moved->restart_count(), 0);
  pb::ListDevicesResponse devices;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster.cluster().ListDevices(&ctx, pb::ListDevicesRequest(), &devices).ok());
  bool seen = false;
  for (const auto& v : devices.devices()) {
    if (v.device().id() != card) continue;
    seen = true;
    ASSERT_TRUE(v.has_quarantine()) << v.DebugString();
    EXPECT_EQ(v.quarantine().reason(), absl::StrCat("fatal health signal (", c.reason, ")"));
    EXPECT_LT(FromProtoTime(v.quarantine().since()) - injected, absl::Seconds(10));
  }
  EXPECT_TRUE(seen) << card;
  auto neighbour = cluster.Get(running[1].id());
  ASSERT_TRUE(neighbour.ok());
  EXPECT_EQ(neighbour->state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(neighbour->generation(), running[1].generation());
}

INSTANTIATE_TEST_SUITE_P(EachVendor, FatalSignal,
                         ::testing::Values(FatalSignalCase{"dgx-h100", "ecc_uncorrected_volatile", 1,
                                                           "nvml: 1 uncorrected ECC error(s) since the driver loaded"},
                                           FatalSignalCase{"dgx-h100", "rows_remap_failed", true,
                                                           "nvml: row remapping failed (no spare rows left)"},
                                           FatalSignalCase{"mlu370-x8", "problem", "x",
                                                           "cndev: device in problem (cndevGetCardHealthState)"},
                                           FatalSignalCase{"metax-c500", "ecc_uncorrected_volatile", 2,
                                                           "mxsml: 2 uncorrected ECC error(s) since the driver loaded"},
                                           FatalSignalCase{
                                               "intel-max1550", "memory_health", "replace",
                                               "levelzero: memory: replace the card (uncorrectable errors)"}),
                         [](const ::testing::TestParamInfo<FatalSignalCase>& param_info) {
                           std::string name = absl::StrCat(param_info.param.fixture, "_", param_info.param.field);
                           for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

}  // namespace
}  // namespace hetpool::testing
