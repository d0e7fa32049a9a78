// The node agent's parts, each on its own and then wired in the Session, with a fake spawner, a
// fake daemon and a clock the test moves (tests/testing/fake_agent_parts.h): no process is
// forked and no socket is opened (issue 67).
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "src/agent/card_process_query.h"
#include "src/agent/fence_timer.h"
#include "src/agent/launch_gate.h"
#include "src/agent/launch_spec_builder.h"
#include "src/agent/log_shipper.h"
#include "src/agent/process_reports.h"
#include "src/agent/registration_client.h"
#include "src/agent/runner.h"
#include "src/agent/session.h"
#include "src/common/job_paths.h"
#include "src/common/leader_words.h"
#include "tests/testing/eventually.h"
#include "tests/testing/fake_agent_parts.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::agent {
namespace {

namespace pb = ::hetpool::v1;
using hetpool::testing::Eventually;
using hetpool::testing::FakeDaemon;
using hetpool::testing::FakeSpawner;
using hetpool::testing::ManualClock;
using hetpool::testing::TempDir;

pb::LaunchOrder Order(const std::string& job, uint64_t generation, const std::string& working_dir) {
  pb::LaunchOrder order;
  order.set_job_id(job);
  order.set_generation(generation);
  order.add_device_ids("nvidia0");
  pb::NodeLaunchPlan* plan = order.mutable_plan();
  plan->add_argv("/usr/bin/torchrun");
  plan->add_argv("train.py");
  plan->set_working_dir(working_dir);
  plan->set_procs(1);
  plan->set_user("alice");
  plan->set_torch_device("cuda");
  plan->set_dist_backend("nccl");
  (*plan->mutable_env())["CUDA_VISIBLE_DEVICES"] = "0";
  return order;
}

LaunchNodeFacts Facts(const std::string& root) {
  LaunchNodeFacts node;
  node.node_name = "node-a";
  node.work_dir = root + "/work";
  node.job_path = "/usr/bin:/bin";
  node.sandbox.job_dirs = {root};
  node.sandbox.run_as = "root";  // as the agent: no account is switched to
  node.agent_uid = 0;
  return node;
}

// ---- the launch-spec builder

TEST(LaunchSpecBuilder, TheEnvironmentIsTheBasePlusThePlanAndTheMarkerNoPlanCanChange) {
  TempDir dir;
  pb::LaunchOrder order = Order("job-000001", 2, dir.path());
  (*order.mutable_plan()->mutable_env())[kAgentMarkerVariable] = "/elsewhere";
  (*order.mutable_plan()->mutable_env())["LANG"] = "de_DE.UTF-8";
  const LaunchSpec spec = BuildLaunchSpec(order, Facts(dir.path()));
  EXPECT_TRUE(spec.refused.empty()) << spec.refused;
  EXPECT_EQ(spec.env.at("PATH"), "/usr/bin:/bin");
  EXPECT_EQ(spec.env.at("LANG"), "de_DE.UTF-8");  // the plan's, over the base
  EXPECT_EQ(spec.env.at("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(spec.env.at(kAgentMarkerVariable), dir.path() + "/work");
  EXPECT_EQ(spec.run_dir, JobRunDir(dir.path() + "/work", "job-000001", 2));
  EXPECT_EQ(spec.log_path, JobLogPath(dir.path() + "/work", "job-000001", 2));
  EXPECT_EQ(spec.device_ids, std::vector<std::string>{"nvidia0"});
  EXPECT_FALSE(spec.run_as.switch_user);
  EXPECT_FALSE(spec.env.contains("HETPOOL_SIMULATED"));
}

TEST(LaunchSpecBuilder, SimulatedCardsRunGlooOnCpuAndKeepThePlanForInspection) {
  TempDir dir;
  LaunchNodeFacts node = Facts(dir.path());
  node.simulated = true;
  const LaunchSpec spec = BuildLaunchSpec(Order("job-000001", 1, dir.path()), node);
  EXPECT_EQ(spec.env.at("HETPOOL_DIST_BACKEND"), "gloo");
  EXPECT_EQ(spec.env.at("HETPOOL_TORCH_DEVICE"), "cpu");
  EXPECT_EQ(spec.env.at("HETPOOL_PLANNED_DIST_BACKEND"), "nccl");
  EXPECT_TRUE(absl::StrContains(spec.note, "planned nccl on cuda")) << spec.note;
}

TEST(LaunchSpecBuilder, AWorkingDirOutsideTheJobDirsIsRefusedNotStarted) {
  TempDir dir, other;
  const LaunchSpec spec = BuildLaunchSpec(Order("job-000001", 1, other.path()), Facts(dir.path()));
  EXPECT_EQ(spec.refused_failure, "WorkingDirNotFound");
  EXPECT_FALSE(spec.refused.empty());
}

// ---- the launch gate

TEST(LaunchGate, ALaunchWaitsWhileItsAccountRunsAnotherUsersJobAndSaysSoOnce) {
  std::string holder = "job-000007 g1 of bob";
  std::string dirt;
  LaunchGate gate({.uid_holder = [&](uid_t, const std::string&) { return holder; },
                   .dirty_cards = [&](const std::vector<std::string>&) { return dirt; }});
  LaunchSpec spec;
  spec.run_as = RunAs{.switch_user = true, .uid = 61000, .account = "hp-alice"};
  spec.device_ids = {"nvidia0"};
  pb::Orders orders;
  orders.set_version(3);
  gate.Begin();
  EXPECT_FALSE(gate.Admit({"job-000001", 1}, spec));
  gate.End(orders);
  ASSERT_TRUE(gate.held_orders().has_value());
  EXPECT_EQ(gate.held_orders()->version(), 3u);
  google::protobuf::RepeatedPtrField<pb::ProcessStatus> report;
  gate.Report(report);
  ASSERT_EQ(report.size(), 1);
  EXPECT_EQ(report[0].waiting(), "its account hp-alice (uid 61000) still runs job-000007 g1 of bob");
  EXPECT_EQ(report[0].device_ids(0), "nvidia0");
  // A stranger on the card holds it too; then nothing does.
  holder.clear();
  dirt = "nvidia0: pid 4242 (uid 0, python3) holds 2,658 MiB";
  gate.Begin();
  EXPECT_FALSE(gate.Admit({"job-000001", 1}, spec));
  gate.End(orders);
  report.Clear();
  gate.Report(report);
  EXPECT_TRUE(absl::StartsWith(report[0].waiting(), "a card is held by a process of no job: nvidia0"))
      << report[0].waiting();
  dirt.clear();
  gate.Begin();
  EXPECT_TRUE(gate.Admit({"job-000001", 1}, spec));
  gate.End(orders);
  EXPECT_FALSE(gate.held_orders().has_value());
  EXPECT_EQ(gate.held(), 0u);
}

TEST(LaunchGate, ARefusedLaunchNeverWaits) {
  LaunchGate gate({.uid_holder = [](uid_t, const std::string&) { return std::string("someone"); },
                   .dirty_cards = [](const std::vector<std::string>&) { return std::string("dirty"); }});
  LaunchSpec spec;
  spec.refused = "cannot enter working_dir";
  EXPECT_EQ(gate.WhyHeld(spec), "");
}

// ---- the card-process query

class ProcessListingBackend : public drivers::DeviceBackend {
 public:
  absl::string_view Name() const override { return "fake"; }
  bool Simulated() const override { return simulated; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override {
    ++discoveries;
    DeviceRecord d{.id = "gpu0", .uuid = "GPU-1"};
    return std::vector<DeviceRecord>{d};
  }
  absl::StatusOr<std::vector<DeviceRecord>> CardProcesses() override {
    ++process_queries;
    DeviceRecord d{.id = "gpu0", .uuid = "GPU-1"};
    d.processes.push_back(CardProcess{.pid = 4242, .memory_mib = 2658});
    return std::vector<DeviceRecord>{d};
  }
  bool simulated = false;
  int discoveries = 0;
  int process_queries = 0;
};

TEST(CardProcessQueryPart, AsksOnlyForProcessesAndNamesCardsByTheirStableIds) {
  std::vector<std::unique_ptr<drivers::DeviceBackend>> backends;
  backends.push_back(std::make_unique<ProcessListingBackend>());
  auto* backend = static_cast<ProcessListingBackend*>(backends[0].get());
  drivers::InventoryTracker tracker;
  const ProcessReader stranger = [](int) {
    return ProcessFacts{.visible = true, .uid = 0, .group = 1, .command = "python3"};
  };
  CardProcessQuery query(&backends, &tracker, stranger);
  EXPECT_TRUE(query.Now().empty());  // the inventory has not named the card yet
  NodeInventory inventory;
  inventory.devices.push_back(DeviceRecord{.id = "nvidia3", .uuid = "GPU-1"});
  tracker.Update(inventory);
  const auto now = query.Now();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].first, "nvidia3");
  EXPECT_EQ(now[0].second.pid, 4242);
  EXPECT_EQ(backend->discoveries, 0);
  EXPECT_TRUE(absl::StartsWith(query.DirtyCards({"nvidia3"}, {}), "nvidia3: pid 4242"))
      << query.DirtyCards({"nvidia3"}, {});
  EXPECT_EQ(query.DirtyCards({"nvidia1"}, {}), "");
  backend->simulated = true;  // simulated cards run nothing: not asked
  const int asked = backend->process_queries;
  EXPECT_TRUE(query.Now().empty());
  EXPECT_EQ(backend->process_queries, asked);
}

// ---- the log shipper and the process reports

ProcessRecord ExitedRecord(const std::string& log_path, int exit_code) {
  ProcessRecord r;
  r.spec.job_id = "job-000001";
  r.spec.generation = 1;
  r.spec.log_path = log_path;
  r.pid = 4242;
  r.exited = true;
  r.exit_code = exit_code;
  return r;
}

TEST(LogShipper, ShipsTheWholeLogInChunksThenTheExitMayBeReported) {
  TempDir dir;
  const std::string path = dir.path() + "/log";
  const std::string text = std::string(1000, 'a') + "end\n";
  std::ofstream(path) << text;
  std::string daemon;
  LogShipper shipper(
      [&](const Runner::Key&, uint64_t offset, absl::string_view data) {
        if (offset != daemon.size()) return ChunkAnswer{ChunkAnswer::kRetry};
        daemon.append(data.data(), data.size());
        return ChunkAnswer{ChunkAnswer::kTaken, daemon.size()};
      },
      /*chunk_bytes=*/64);
  std::map<Runner::Key, ProcessRecord> records;
  records[{"job-000001", 1}] = ExitedRecord(path, 0);
  records.at({"job-000001", 1}).exited = false;
  google::protobuf::RepeatedPtrField<pb::ProcessStatus> report;
  EXPECT_FALSE(shipper.Ship(records));  // running: shipped, not flushed
  EXPECT_EQ(daemon, text);
  records.at({"job-000001", 1}).exited = true;
  ReportProcesses(records, "node-a", report);
  EXPECT_FALSE(report[0].exited());  // its log is not known to be whole yet
  EXPECT_TRUE(shipper.Ship(records));
  report.Clear();
  ReportProcesses(records, "node-a", report);
  EXPECT_TRUE(report[0].exited());
  EXPECT_EQ(daemon, text);
}

TEST(LogShipper, ADaemonThatCannotTakeAChunkKeepsTheExitBackAndOneThatDoesNotKnowTheJobEndsIt) {
  TempDir dir;
  const std::string path = dir.path() + "/log";
  std::ofstream(path) << "hello\n";
  ChunkAnswer::Kind answer = ChunkAnswer::kRetry;
  LogShipper shipper([&](const Runner::Key&, uint64_t, absl::string_view data) {
    return ChunkAnswer{answer, data.size()};
  });
  std::map<Runner::Key, ProcessRecord> records;
  records[{"job-000001", 1}] = ExitedRecord(path, 0);
  EXPECT_FALSE(shipper.Ship(records));
  EXPECT_FALSE(records.begin()->second.logs_flushed);
  answer = ChunkAnswer::kUnknownJob;
  EXPECT_TRUE(shipper.Ship(records));
  EXPECT_EQ(records.begin()->second.log_pushed, UINT64_MAX);
}

TEST(LogShipper, ANodeThatPrintedNothingStillSaysItsLogExistsAndAContainerRuntimeFailureIsRead) {
  TempDir dir;
  std::vector<uint64_t> offsets;
  LogShipper shipper([&](const Runner::Key&, uint64_t offset, absl::string_view data) {
    offsets.push_back(offset);
    return ChunkAnswer{ChunkAnswer::kTaken, offset + data.size()};
  });
  std::map<Runner::Key, ProcessRecord> records;
  const std::string empty = dir.path() + "/empty";
  std::ofstream(empty).flush();
  records[{"job-000001", 1}] = ExitedRecord(empty, 0);
  const std::string runtime = dir.path() + "/runtime";
  std::ofstream(runtime) << "Error: initializing source docker://x: pinging container registry: no route\n";
  ProcessRecord in_image = ExitedRecord(runtime, kRuntimeFailedExit);
  in_image.spec.container = ContainerRun{};
  in_image.spec.container->image = "localhost/torch:2.4";
  records[{"job-000002", 1}] = in_image;
  EXPECT_TRUE(shipper.Ship(records));
  EXPECT_EQ(offsets.front(), 0u);  // the empty chunk
  const ProcessRecord& failed = records.at({"job-000002", 1});
  EXPECT_EQ(failed.launch_failure, "ContainerFailed");
  EXPECT_TRUE(absl::StrContains(failed.message, "localhost/torch:2.4")) << failed.message;
  google::protobuf::RepeatedPtrField<pb::ProcessStatus> report;
  ReportProcesses(records, "node-a", report);
  ASSERT_EQ(report.size(), 2);
  EXPECT_FALSE(report[0].has_rank_failure());
  EXPECT_EQ(report[1].rank_failure().launch_failure(), "ContainerFailed");
  EXPECT_EQ(report[1].rank_failure().node(), "node-a");
}

// ---- the registration client

TEST(RegistrationClient, AFollowerNamingTheLeaderSendsTheNextTryThereAtOnce) {
  FakeDaemon daemon;
  daemon.SetAddress("a:1", {grpc::Status(grpc::StatusCode::UNAVAILABLE, absl::StrCat(kLeaderIsAt, "c:3")), true});
  RegistrationClient client({"a:1", "b:2", "c:3"}, &daemon, absl::Milliseconds(200));
  pb::RegisterResponse resp;
  EXPECT_EQ(client.Register(pb::RegisterRequest(), &resp), nullptr);
  client.WaitBeforeNextTry([] { return true; });
  // No backoff after a named leader, and no wait on a connection (the follower was reached).
  ASSERT_EQ(daemon.waits().size(), 1u);
  EXPECT_EQ(daemon.waits()[0], std::make_pair(std::string(), absl::Milliseconds(200)));
  EXPECT_NE(client.Register(pb::RegisterRequest(), &resp), nullptr);
  EXPECT_EQ(daemon.registrations(), (std::vector<std::string>{"a:1", "c:3"}));
}

TEST(RegistrationClient, AnUnreachableDaemonIsWaitedOnAndTheWaitDoublesToFiveSeconds) {
  FakeDaemon daemon;
  daemon.SetAddress("a:1", {grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), false});
  daemon.SetAddress("b:2", {grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), false});
  RegistrationClient client({"a:1", "b:2"}, &daemon, absl::Milliseconds(200));
  pb::RegisterResponse resp;
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(client.Register(pb::RegisterRequest(), &resp), nullptr);
    client.WaitBeforeNextTry([] { return true; });
  }
  const auto waits = daemon.waits();
  EXPECT_EQ(waits[0], std::make_pair(std::string("b:2"), absl::Milliseconds(200)));  // the next address's connection
  EXPECT_EQ(waits[1], std::make_pair(std::string("a:1"), absl::Milliseconds(400)));
  EXPECT_EQ(waits[5].second, absl::Seconds(5));
  EXPECT_EQ(waits[6].second, absl::Seconds(5));
  daemon.SetAddress("b:2", {});
  EXPECT_NE(client.Register(pb::RegisterRequest(), &resp), nullptr);
  EXPECT_EQ(client.backoff(), absl::Milliseconds(200));
}

// ---- the fence timer

TEST(FenceTimer, FencesOncePerOutageAtTheShorterOfTheFlagAndTheDaemonsGrace) {
  ManualClock clock;
  FenceTimer fence(absl::Seconds(20), nullptr, clock.AsClock());
  EXPECT_FALSE(fence.CutOffNow());  // no daemon has announced a deadline
  pb::RegisterResponse resp;
  resp.set_lease_ttl_ms(15'000);
  resp.set_orphan_grace_ms(60'000);
  fence.Registered(resp);
  EXPECT_EQ(fence.fence_after(), absl::Seconds(20));
  clock.Advance(absl::Seconds(19));
  EXPECT_FALSE(fence.CutOffNow());
  fence.Contacted();
  clock.Advance(absl::Seconds(19));
  EXPECT_FALSE(fence.CutOffNow());
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(fence.CutOffNow());
  EXPECT_FALSE(fence.CutOffNow());  // once
  EXPECT_TRUE(fence.fenced());
  fence.Registered(resp);
  EXPECT_FALSE(fence.fenced());
  // Zero: never. No flag: the daemon's grace (80% of an older daemon's lease).
  FenceTimer never(absl::ZeroDuration(), nullptr, clock.AsClock());
  never.Registered(resp);
  clock.Advance(absl::Hours(5));
  EXPECT_FALSE(never.CutOffNow());
  FenceTimer daemons(std::nullopt, nullptr, clock.AsClock());
  resp.set_orphan_grace_ms(0);
  daemons.Registered(resp);
  EXPECT_EQ(daemons.fence_after(), absl::Seconds(12));
}

// ---- the runner, through the spawning seam

LaunchSpec RunnableSpec(const TempDir& dir, const std::string& job) {
  LaunchSpec spec = BuildLaunchSpec(Order(job, 1, dir.path()), Facts(dir.path()));
  spec.argv = {"/usr/bin/torchrun", "--nproc-per-node=2", "train.py"};
  spec.procs = 2;
  return spec;
}

TEST(Runner, StartsThroughTheSpawnerReapsAndReportsRanks) {
  TempDir dir;
  FakeSpawner spawner;
  ManualClock clock;
  ProcessLedger ledger(dir.path() + "/groups", dir.path());
  Runner runner({.ledger = &ledger, .clock = clock.AsClock(), .spawner = &spawner});
  const LaunchSpec spec = RunnableSpec(dir, "job-000001");
  runner.Start(spec);
  const ProcessRecord& r = runner.records().at({"job-000001", 1});
  ASSERT_FALSE(r.exited) << r.message;
  const FakeSpawner::Process p = spawner.Get(r.pid);
  EXPECT_EQ(p.argv, spec.argv);
  EXPECT_EQ(p.env.at(kAgentMarkerVariable), spec.env.at(kAgentMarkerVariable));
  EXPECT_EQ(p.start_dir, spec.working_dir);
  EXPECT_TRUE(std::filesystem::exists(spec.log_path));
  EXPECT_TRUE(runner.AnyRunning());
  EXPECT_FALSE(runner.Poll());  // nothing new: ranks not seen yet
  spawner.ranks_ready = true;
  EXPECT_TRUE(runner.Poll());
  EXPECT_EQ(r.global_ranks, (std::vector<int>{0, 1}));
  spawner.Exit(r.pid, 3);
  EXPECT_TRUE(runner.Poll());
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(runner.AnyRunning());
  // The group (orphaned ranks) is killed at torchrun's exit.
  EXPECT_EQ(spawner.Get(r.pid).signals, std::vector<int>{SIGKILL});
}

TEST(Runner, AKillEscalatesToSigkillAfterItsGraceOnTheInjectedClock) {
  TempDir dir;
  FakeSpawner spawner;
  spawner.ignore_sigterm = true;
  ManualClock clock;
  Runner runner({.kill_grace = absl::Seconds(10), .clock = clock.AsClock(), .spawner = &spawner});
  runner.Start(RunnableSpec(dir, "job-000001"));
  const ProcessRecord& r = runner.records().at({"job-000001", 1});
  runner.Kill({"job-000001", 1}, "preempted", absl::Seconds(30));
  EXPECT_EQ(spawner.Get(r.pid).signals, std::vector<int>{SIGTERM});
  clock.Advance(absl::Seconds(29));
  runner.Poll();
  EXPECT_EQ(spawner.Get(r.pid).signals, std::vector<int>{SIGTERM});
  clock.Advance(absl::Seconds(2));
  runner.Poll();  // escalates
  runner.Poll();  // reaps
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.message, "stopped: preempted");
}

TEST(Runner, ALaunchThatStopsBeforeExecOrCannotBeSpawnedExits127SayingWhy) {
  TempDir dir;
  FakeSpawner spawner;
  Runner runner({.spawner = &spawner});
  spawner.stop_at = ChildError{Stage::kScript, ENOENT};
  LaunchSpec spec = RunnableSpec(dir, "job-000001");
  spec.script = "train.py";
  runner.Start(spec);
  const ProcessRecord& script = runner.records().at({"job-000001", 1});
  EXPECT_TRUE(script.exited);
  EXPECT_EQ(script.exit_code, 127);
  EXPECT_EQ(script.launch_failure, "ScriptNotFound");
  EXPECT_TRUE(absl::StrContains(script.message, "cannot read script train.py in ")) << script.message;
  spawner.stop_at.reset();
  spawner.fail_with = "fork: Resource temporarily unavailable";
  runner.Start(RunnableSpec(dir, "job-000002"));
  EXPECT_EQ(runner.records().at({"job-000002", 1}).message, "fork: Resource temporarily unavailable");
  spawner.fail_with.clear();
  LaunchSpec refused = RunnableSpec(dir, "job-000003");
  refused.refused = "no such account";
  const size_t before = spawner.spawned();
  runner.Start(refused);
  EXPECT_EQ(spawner.spawned(), before);  // never spawned
  EXPECT_EQ(runner.records().at({"job-000003", 1}).exit_code, 127);
}

// ---- the session, wired

class SimCards : public drivers::DeviceBackend {
 public:
  absl::string_view Name() const override { return "fake-sim"; }
  bool Simulated() const override { return true; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override {
    return std::vector<DeviceRecord>{DeviceRecord{.id = "nvidia0", .vendor = Vendor::kNvidia, .memory_mib = 81920}};
  }
};

TEST(Session, RegistersStartsWhatTheOrdersSayReportsItAndShipsItsLog) {
  TempDir dir;
  FakeDaemon daemon;
  FakeSpawner spawner;
  ManualClock clock;
  SessionOptions options;
  options.servers = {"daemon:1"};
  options.node_name = "node-a";
  options.work_dir = dir.path() + "/work";
  std::filesystem::create_directories(options.work_dir);
  options.sandbox.job_dirs = {dir.path()};
  options.sandbox.run_as = "root";
  options.dialer = &daemon;
  options.spawner = &spawner;
  options.clock = clock.AsClock();
  std::vector<std::unique_ptr<drivers::DeviceBackend>> backends;
  backends.push_back(std::make_unique<SimCards>());
  Session session(options, std::move(backends));
  std::atomic<bool> stop{false};
  std::thread run([&] { session.Run(&stop); });

  pb::Orders orders;
  orders.set_version(1);
  *orders.add_launches() = Order("job-000001", 1, dir.path());
  daemon.PushOrders(orders);
  const auto reported = [&](auto&& what) {
    return Eventually(
        [&] {
          auto beat = daemon.last_heartbeat();
          return beat && beat->processes_size() == 1 && what(beat->processes(0));
        },
        absl::Seconds(30));
  };
  EXPECT_TRUE(reported([](const pb::ProcessStatus& s) { return s.running() && s.job_id() == "job-000001"; }));
  EXPECT_EQ(daemon.registrations(), std::vector<std::string>{"daemon:1"});
  EXPECT_EQ(daemon.last_heartbeat()->applied_orders_version(), 1u);
  // The simulated card: the ranks run gloo on CPU.
  EXPECT_EQ(spawner.Get(spawner.last_pid()).env.at("HETPOOL_DIST_BACKEND"), "gloo");
  std::ofstream(JobLogPath(options.work_dir, "job-000001", 1), std::ios::app) << "step 1 loss 0.5\n";
  spawner.Exit(spawner.last_pid(), 0);
  EXPECT_TRUE(reported([](const pb::ProcessStatus& s) { return s.exited() && s.exit_code() == 0; }));
  EXPECT_EQ(daemon.log_of("job-000001"), "step 1 loss 0.5\n");
  stop = true;
  run.join();
}

}  // namespace
}  // namespace hetpool::agent
