// The control plane over real gRPC: bad input, unknown ids, inventory views, reflection, draining,
// inventory changes under a running job, and launch failures.
#include <fstream>

#include "gtest/gtest.h"
#include "hetpool/v1/agent.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "src/common/grpc_status.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"
#include "reflection_client.grpc.pb.h"

namespace hetpool::testing {
namespace {

class ControlPlaneTest : public ExamplePoolSuite {
 protected:
  static int JobCount() {
    pb::ListJobsResponse list;
    grpc::ClientContext ctx;
    EXPECT_TRUE(cluster_->jobs().ListJobs(&ctx, {}, &list).ok());
    return list.jobs_size();
  }
};

TEST_F(ControlPlaneTest, InvalidSpecsAreRejectedNamingTheFieldAndNothingIsStored) {
  const int before = JobCount();
  struct Case {
    const char* what;
    void (*mutate)(pb::JobSpec&);
    grpc::StatusCode code;
    const char* field;
  } cases[] = {
      {"no command", [](pb::JobSpec& s) { s.clear_python(); }, grpc::StatusCode::INVALID_ARGUMENT, "command"},
      {"nnodes 0", [](pb::JobSpec& s) { s.set_nnodes(0); }, grpc::StatusCode::INVALID_ARGUMENT, "nnodes"},
      {"unknown vendor", [](pb::JobSpec& s) { s.mutable_requirements()->add_vendors("amd"); },
       grpc::StatusCode::INVALID_ARGUMENT, "requirements.vendors[0]"},
      {"empty user", [](pb::JobSpec& s) { s.clear_user(); }, grpc::StatusCode::INVALID_ARGUMENT, "user"},
      {"oversized name", [](pb::JobSpec& s) { s.set_name(std::string(1000, 'n')); }, grpc::StatusCode::INVALID_ARGUMENT,
       "name"},
      {"more devices than any node", [](pb::JobSpec& s) { s.set_devices_per_node(8); },
       grpc::StatusCode::FAILED_PRECONDITION, "nnodes/devices_per_node"},
      {"more nodes than the pool", [](pb::JobSpec& s) { s.set_nnodes(3); }, grpc::StatusCode::FAILED_PRECONDITION,
       "nnodes/devices_per_node"},
      {"model not in the pool", [](pb::JobSpec& s) { s.mutable_requirements()->add_models("B200"); },
       grpc::StatusCode::FAILED_PRECONDITION, "nnodes/devices_per_node"},
  };
  for (const auto& c : cases) {
    pb::SubmitJobRequest req;
    *req.mutable_spec() = cluster_->TrainSpec(2, 2, {});
    c.mutate(*req.mutable_spec());
    pb::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status status = cluster_->jobs().SubmitJob(&ctx, req, &resp);
    EXPECT_EQ(status.error_code(), c.code) << c.what << ": " << status.error_message();
    EXPECT_EQ(status.error_message().rfind(c.field, 0), 0u) << c.what << ": " << status.error_message();
  }
  EXPECT_EQ(JobCount(), before);
}

TEST_F(ControlPlaneTest, UnknownIdsAreNotFound) {
  grpc::ClientContext c1, c2, c3, c4, c5, c6;
  pb::GetJobRequest get;
  get.set_job_id("job-424242");
  pb::Job job;
  EXPECT_EQ(cluster_->jobs().GetJob(&c1, get, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  pb::CancelJobRequest cancel;
  cancel.set_job_id("nope");
  EXPECT_EQ(cluster_->jobs().CancelJob(&c2, cancel, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  pb::WatchJobRequest watch;
  watch.set_job_id("nope");
  auto reader = cluster_->jobs().WatchJob(&c3, watch);
  pb::WatchJobResponse update;
  EXPECT_FALSE(reader->Read(&update));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  pb::GetNodeRequest node_req;
  node_req.set_name("node-z");
  pb::Node node;
  EXPECT_EQ(cluster_->cluster().GetNode(&c4, node_req, &node).error_code(), grpc::StatusCode::NOT_FOUND);
  pb::DrainNodeRequest drain;
  drain.set_name("node-z");
  EXPECT_EQ(cluster_->cluster().DrainNode(&c5, drain, &node).error_code(), grpc::StatusCode::NOT_FOUND);
  pb::ListDevicesRequest devices_req;
  devices_req.set_vendor("amd");
  pb::ListDevicesResponse devices;
  EXPECT_EQ(cluster_->cluster().ListDevices(&c6, devices_req, &devices).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ControlPlaneTest, InventoryIsVisibleWithTopology) {
  pb::ListNodesResponse nodes;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster_->cluster().ListNodes(&ctx, {}, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 2);
  EXPECT_EQ(nodes.nodes(0).name(), "node-a");
  EXPECT_EQ(nodes.nodes(0).state(), pb::NODE_STATE_READY);
  EXPECT_TRUE(nodes.nodes(0).inventory().simulated());
  pb::ListDevicesRequest req;
  req.set_vendor("metax");
  pb::ListDevicesResponse devices;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(cluster_->cluster().ListDevices(&ctx2, req, &devices).ok());
  ASSERT_EQ(devices.devices_size(), 2);
  EXPECT_EQ(devices.devices(0).node(), "node-b");
  EXPECT_EQ(devices.devices(0).device().architecture(), "xcore1000");
  ASSERT_EQ(devices.devices(0).device().links_size(), 1);
  EXPECT_EQ(devices.devices(0).device().links(0).kind(), pb::LINK_KIND_METAXLINK);
}

TEST_F(ControlPlaneTest, ServerReflectionListsTheServices) {
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(cluster_->channel());
  grpc::ClientContext ctx;
  auto stream = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("*");
  ASSERT_TRUE(stream->Write(req));
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(stream->Finish().ok());
  std::vector<std::string> services;
  for (const auto& s : resp.list_services_response().service()) services.push_back(s.name());
  for (const char* name : {"hetpool.v1.JobService", "hetpool.v1.ClusterService", "hetpool.v1.AgentService"}) {
    EXPECT_NE(std::find(services.begin(), services.end(), name), services.end()) << name;
  }
}

TEST_F(ControlPlaneTest, DrainedNodeGetsNoWorkUntilUndrained) {
  grpc::ClientContext ctx;
  pb::DrainNodeRequest drain;
  drain.set_name("node-b");
  pb::Node node;
  ASSERT_TRUE(cluster_->cluster().DrainNode(&ctx, drain, &node).ok());
  EXPECT_TRUE(node.drained());
  auto spec = cluster_->TrainSpec(2, 2, {"--steps", "2"});
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok());
  auto waiting = cluster_->WaitFor(
      job->id(), [](const pb::Job& j) { return j.reason() == "Unschedulable"; }, absl::Seconds(10));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->state(), pb::JOB_STATE_PENDING);
  grpc::ClientContext ctx2;
  ASSERT_TRUE(cluster_->cluster().UndrainNode(&ctx2, drain, &node).ok());
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  EXPECT_TRUE(done.ok()) << done.status();
}

TEST_F(ControlPlaneTest, ChangedInventoryUpdatesWithoutDisturbingRunningJobs) {
  // A job on node-a's and node-b's NVIDIA cards; then node-a loses a Cambricon card.
  auto job = cluster_->Submit(cluster_->TrainSpec(2, 2, {"--steps", "60", "--step-sleep", "0.1"}));
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(cluster_->WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  const std::string path = cluster_->InventoryPath(0);
  nlohmann::json inventory = nlohmann::json::parse(std::ifstream(path));
  // cambricon1 falls off the bus: gone, and no longer linked from cambricon0.
  inventory["devices"].erase(inventory["devices"].size() - 1);
  inventory["devices"][2]["links"] = nlohmann::json::array();
  std::ofstream(path + ".tmp") << inventory.dump();
  std::filesystem::rename(path + ".tmp", path);
  EXPECT_TRUE(Eventually(
      [&] {
        pb::GetNodeRequest req;
        req.set_name("node-a");
        pb::Node node;
        grpc::ClientContext ctx;
        // The card stays listed, unhealthy, so nothing is scheduled onto it and operators see why.
        return cluster_->cluster().GetNode(&ctx, req, &node).ok() && node.inventory().devices_size() == 4 &&
               node.inventory().devices(3).id() == "cambricon1" && !node.inventory().devices(3).healthy();
      },
      absl::Seconds(15), absl::Milliseconds(200)));
  auto mid = cluster_->Get(job->id());
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->state(), pb::JOB_STATE_RUNNING);
  auto done = cluster_->WaitFor(
      job->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), pb::JOB_STATE_SUCCEEDED) << done->message();
  EXPECT_EQ(done->generation(), 1u);
}

TEST_F(ControlPlaneTest, AMissingWorkingDirFailsTheJobAtOnceWithTheReason) {
  auto spec = cluster_->TrainSpec(1, 1, {});
  spec.set_working_dir("/nonexistent/hetpool/dir");
  spec.set_max_restarts(3);  // restarting cannot help: none is spent
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok());
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(30));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->reason(), "WorkingDirNotFound");
  EXPECT_EQ(done->restart_count(), 0);
  EXPECT_EQ(done->failure_origin(), pb::FAILURE_ORIGIN_JOB);
  EXPECT_EQ(done->failure().launch_failure(), "WorkingDirNotFound");
  EXPECT_NE(done->message().find("cannot enter working_dir /nonexistent/hetpool/dir"), std::string::npos)
      << done->message();
}

// The agent checks, as the job's account and before torchrun starts, that the script is there.
TEST_F(ControlPlaneTest, AMissingScriptFailsTheJobAtOnceAsScriptNotFound) {
  auto spec = cluster_->TrainSpec(1, 0, {});
  spec.mutable_python()->set_script("deploy/examples/no_such_script.py");
  spec.set_procs_per_node(1);
  spec.mutable_requirements()->add_vendors("cpu");
  spec.set_max_restarts(3);
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(30));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->reason(), "ScriptNotFound");
  EXPECT_EQ(done->restart_count(), 0);
  EXPECT_EQ(done->failure_origin(), pb::FAILURE_ORIGIN_JOB);
  EXPECT_NE(done->message().find("deploy/examples/no_such_script.py"), std::string::npos) << done->message();
  EXPECT_NE(done->message().find("No such file"), std::string::npos) << done->message();
}

// torchrun exits 1 whichever way a worker failed: the job still says which rank failed, with its
// own exit code and its last words, in the status and the events.
TEST_F(ControlPlaneTest, AFailingRankIsNamedWithItsOwnExitCodeAndLastLines) {
  auto spec = cluster_->TrainSpec(2, 0, {});
  spec.mutable_python()->set_script("tests/integration/scripts/exit_on_rank.py");
  spec.mutable_python()->add_args("2");
  spec.mutable_python()->add_args("3");
  spec.set_procs_per_node(2);
  spec.mutable_requirements()->add_vendors("cpu");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->reason(), "NonZeroExit");
  EXPECT_EQ(done->failure_origin(), pb::FAILURE_ORIGIN_JOB);
  const pb::RankFailure& failure = done->failure();
  EXPECT_EQ(failure.global_rank(), 2) << done->message();
  EXPECT_EQ(failure.exit_code(), 3);
  EXPECT_EQ(failure.signal(), "");
  ASSERT_GT(failure.last_lines_size(), 0);
  EXPECT_EQ(failure.last_lines(failure.last_lines_size() - 1), "giving up: out of data on this shard");
  EXPECT_NE(done->message().find("rank 2 on " + failure.node() + " exited with code 3: giving up"), std::string::npos)
      << done->message();
  const auto& last_event = done->events(done->events_size() - 1);
  EXPECT_EQ(last_event.reason(), "NonZeroExit");
  EXPECT_EQ(last_event.message(), done->message());
}

TEST_F(ControlPlaneTest, WatchStreamsStateChangesToTheEnd) {
  auto spec = cluster_->TrainSpec(1, 0, {"--steps", "3"});
  spec.set_procs_per_node(2);
  spec.mutable_requirements()->add_vendors("cpu");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  pb::WatchJobRequest req;
  req.set_job_id(job->id());
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto reader = cluster_->jobs().WatchJob(&ctx, req);
  pb::WatchJobResponse update;
  std::vector<pb::JobState> states;
  while (reader->Read(&update)) {
    if (states.empty() || states.back() != update.job().state()) states.push_back(update.job().state());
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_NE(std::find(states.begin(), states.end(), pb::JOB_STATE_RUNNING), states.end());
  auto done = cluster_->Get(job->id());
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->vendor(), "cpu");
  EXPECT_EQ(done->launch_plan(0).env().at("HETPOOL_DIST_BACKEND"), "gloo");
}

// Issue 19: hetpoold spreads a growing fleet's heartbeats (--max-heartbeats-per-second), and an
// agent that registered while the fleet was small follows the period its heartbeats' answers give.
TEST(HeartbeatSpreading, AnAgentBeatsLessOftenOnceTheFleetGrowsAfterItRegistered) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);  // node-a
  options.lease_ttl = absl::Seconds(30);
  // One node: every 0.5 s (1 node at 2 a second); ten nodes: every 5 s (a third of the lease is 10 s).
  options.daemon_args = {"--heartbeat-interval", "300ms", "--max-heartbeats-per-second", "2"};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.DaemonLog();
  auto node_a = [&]() -> absl::StatusOr<pb::Node> {
    pb::GetNodeRequest req;
    req.set_name("node-a");
    pb::Node node;
    grpc::ClientContext ctx;
    grpc::Status status = cluster.cluster().GetNode(&ctx, req, &node);
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return node;
  };
  // node-a's distinct heartbeats seen within `window` (each moves its last_heartbeat).
  auto beats_within = [&](absl::Duration window) {
    int beats = 0;
    std::string last;
    for (absl::Time end = absl::Now() + window; absl::Now() < end; absl::SleepFor(absl::Milliseconds(50))) {
      auto node = node_a();
      if (!node.ok()) continue;
      const std::string seen = node->last_heartbeat().SerializeAsString();
      if (!last.empty() && seen != last) ++beats;
      last = seen;
    }
    return beats;
  };
  EXPECT_GE(beats_within(absl::Seconds(3)), 3);  // every 0.5 s: about six

  // Nine more nodes register (as agents would; no agent runs for them).
  auto first = node_a();
  ASSERT_TRUE(first.ok()) << first.status();
  auto agents = pb::AgentService::NewStub(cluster.channel());
  for (int i = 0; i < 9; ++i) {
    pb::RegisterRequest req;
    req.set_node_name("extra-" + std::to_string(i));
    req.set_address("127.0.0.1");
    req.set_torchrun_path("/usr/bin/torchrun");
    req.set_work_dir("/tmp/extra");
    *req.mutable_inventory() = first->inventory();
    pb::RegisterResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(agents->Register(&ctx, req, &resp).ok());
    if (i == 8) {
      EXPECT_EQ(resp.heartbeat_interval_ms(), 5000);
    }
  }
  // node-a's next answer tells it 5 s; from then on it beats about once in 6 s (12 times at 0.5 s).
  EXPECT_GE(beats_within(absl::Seconds(2)), 1);
  EXPECT_LE(beats_within(absl::Seconds(6)), 3) << cluster.AgentLog(0);
}

TEST(HeartbeatSpreading, HetpooldRefusesANegativeOrNonNumericCap) {
  for (const char* value : {"-1", "nan"}) {
    auto [code, out] = RunRefusedDaemon(std::string("--max-heartbeats-per-second ") + value);
    EXPECT_NE(code, 0) << value;
    EXPECT_NE(out.find("--max-heartbeats-per-second must be a number, not negative (0: no cap)"), std::string::npos)
        << value << ": " << out;
  }
}

}  // namespace
}  // namespace hetpool::testing
