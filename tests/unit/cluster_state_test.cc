// The job state machine and the claim bookkeeping, driven through the agent-facing calls with an
// injected clock (no threads, no network).
#include "src/daemon/state/cluster_state.h"

#include <atomic>
#include <map>
#include <thread>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "drivers/fingerprint/fingerprint.h"
#include "scheduler/framework/profile.h"
#include "src/common/convert.h"
#include "src/daemon/store/sqlite_store.h"
#include "tests/testing/state_parts.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::daemon {
namespace {

// The real store, with a switch that makes every write fail the way a full disk does.
class RefusableStore : public Store {
 public:
  explicit RefusableStore(Store* inner) : inner_(inner) {}
  absl::Status PutJob(const pb::Job& job) override {
    if (refuse) return absl::InternalError("sqlite: database or disk is full");
    return inner_->PutJob(job);
  }
  absl::Status PutNode(const pb::Node& node) override {
    if (refuse) return absl::InternalError("sqlite: database or disk is full");
    return inner_->PutNode(node);
  }
  absl::StatusOr<std::vector<StoredRow>> LoadJobRows() override { return inner_->LoadJobRows(); }
  absl::StatusOr<std::vector<StoredRow>> LoadNodeRows() override { return inner_->LoadNodeRows(); }
  absl::StatusOr<uint64_t> HighestJobSeq() override { return inner_->HighestJobSeq(); }
  absl::Status ArchiveJobs(const std::vector<pb::Job>& jobs, bool keep) override {
    if (refuse) return absl::InternalError("sqlite: database or disk is full");
    return inner_->ArchiveJobs(jobs, keep);
  }
  absl::StatusOr<std::optional<pb::Job>> GetArchivedJob(const std::string& id) override {
    return inner_->GetArchivedJob(id);
  }
  absl::StatusOr<std::vector<pb::Job>> ArchivedJobsSince(absl::Time since) override {
    return inner_->ArchivedJobsSince(since);
  }
  bool refuse = false;

 private:
  Store* inner_;
};

using testing::CountingObserver;

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    state_.reset();
    refusable_.reset();
    store_.reset();
    auto store = SqliteStore::Open(dir_.path() + "/hetpool.db");
    ASSERT_TRUE(store.ok());
    store_ = *std::move(store);
    refusable_ = std::make_unique<RefusableStore>(store_.get());
    ClusterOptions options;
    options.lease_ttl = absl::Seconds(10);
    options.orphan_grace = absl::Seconds(20);  // lost after 30 s of silence
    options.clock = [this] { return now_; };
    options.monotonic_clock = [this] { return now_ + steady_offset_; };
    options.observer = &observer_;
    options.retain_finished = retain_finished_;  // off unless a test sets it
    options.archive_finished = archive_finished_;
    options.preemption = preemption_;
    options.queues = queues_;
    options.max_heartbeats_per_second = max_heartbeats_per_second_;
    state_ = std::make_unique<ClusterState>(options, refusable_.get(), policy_.get());
    ASSERT_TRUE(state_->Load().ok());
  }

  std::string Register(const std::string& node, int nvidia_cards, std::vector<pb::ProcessStatus> processes = {},
                       const std::string& model = "H100") {
    pb::RegisterRequest req;
    req.set_node_name(node);
    req.set_address("127.0.0.1");
    req.set_torchrun_path("/usr/bin/torchrun");
    req.set_work_dir("/tmp/" + node);
    *req.mutable_inventory() = Inventory(nvidia_cards, model);
    for (auto& p : processes) *req.add_processes() = p;
    auto resp = state_->Register(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    sessions_[node] = resp.ok() ? resp->session_id() : "";
    return sessions_[node];
  }

  static pb::NodeInventory Inventory(int nvidia_cards, const std::string& model = "H100") {
    pb::NodeInventory inventory;
    inventory.set_cpus(16);
    inventory.set_memory_mib(65536);
    for (int i = 0; i < nvidia_cards; ++i) {
      auto* d = inventory.add_devices();
      d->set_id("nvidia" + std::to_string(i));
      d->set_index(i);
      d->set_vendor("nvidia");
      d->set_model(model);
      d->set_memory_mib(81920);
      d->set_healthy(true);
      d->set_local_cpus(absl::StrCat(i * 4, "-", i * 4 + 3));  // four cores near each card
      // What the agent's fingerprint pass reports for these cards.
      DeviceRecord record;
      record.vendor = Vendor::kNvidia;
      record.model = model;
      record.memory_mib = 81920;
      record.capability.arch_major = model == "A100" ? 8 : 9;
      drivers::ApplyFingerprint(drivers::SpecTable::Defaults(), record);
      d->set_architecture(record.architecture);
      d->set_fingerprint(record.fingerprint);
      *d->mutable_capability() = ToProto(record).capability();
    }
    return inventory;
  }

  // What the node's order stream would send now (any version).
  absl::StatusOr<std::optional<pb::Orders>> CurrentOrders(const std::string& node) {
    return state_->OrdersSince({{node, sessions_[node], 0}}).front();
  }

  pb::Orders Orders(const std::string& node) {
    auto orders = CurrentOrders(node);
    EXPECT_TRUE(orders.ok()) << orders.status();
    return orders.ok() && orders->has_value() ? **orders : pb::Orders();
  }

  static pb::ProcessStatus Proc(const std::string& job, uint64_t gen, bool running, int exit_code = 0) {
    pb::ProcessStatus p;
    p.set_job_id(job);
    p.set_generation(gen);
    p.set_running(running);
    p.set_exited(!running);
    p.set_exit_code(exit_code);
    p.set_pid(4242);
    p.add_device_ids("nvidia0");
    p.add_device_ids("nvidia1");
    return p;
  }

  absl::Status Heartbeat(const std::string& node, std::vector<pb::ProcessStatus> processes,
                         std::optional<pb::NodeInventory> inventory = std::nullopt) {
    pb::HeartbeatRequest req;
    req.set_node_name(node);
    req.set_session_id(sessions_[node]);
    // Acts like an agent that applied the newest orders (none when its session is gone).
    auto orders = CurrentOrders(node);
    if (orders.ok() && orders->has_value()) req.set_applied_orders_version((*orders)->version());
    for (auto& p : processes) *req.add_processes() = p;
    if (inventory) *req.mutable_inventory() = *inventory;
    return state_->Heartbeat(req).status();
  }

  pb::JobSpec Spec(int nnodes, int devices, int max_restarts = 0) {
    return testing::TrainingSpec(nnodes, devices, max_restarts);
  }

  pb::Job Job(const std::string& id) {
    auto job = state_->GetJob(id);
    EXPECT_TRUE(job.ok());
    return job.ok() ? *job : pb::Job();
  }

  // Nodes a and b of 2 cards, one busy card on each (a drained while the second job is placed).
  // Returns the id of a's job.
  std::string OneBusyCardOnAAndB() {
    Register("a", 2);
    Register("b", 2);
    auto r1 = state_->Submit(Spec(1, 1), "");
    state_->Tick();
    EXPECT_EQ(Job(r1->id()).placement(0).node(), "a");
    EXPECT_TRUE(state_->SetDrained("a", true).ok());
    auto r2 = state_->Submit(Spec(1, 1), "");
    state_->Tick();
    EXPECT_EQ(Job(r2->id()).placement(0).node(), "b");
    EXPECT_TRUE(state_->SetDrained("a", false).ok());
    return r1->id();
  }

  int FreeDevices(const std::string& node) {
    auto devices = state_->ListDevices(node, "");
    int free = 0;
    for (const auto& d : *devices) free += d.allocated_to().empty();
    return free;
  }

  testing::TempDir dir_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  // The monotonic clock is now_ plus this: a test steps the wall clock by moving now_ and this
  // the other way.
  absl::Duration steady_offset_;
  absl::Duration retain_finished_ = absl::ZeroDuration();
  bool archive_finished_ = true;
  PreemptionMode preemption_ = PreemptionMode::kOff;
  std::optional<QueueConfig> queues_;
  double max_heartbeats_per_second_ = 1000;
  // The daemon's policy: the default plugin profile.
  std::unique_ptr<scheduler::Framework> policy_ = scheduler::DefaultFramework();
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<RefusableStore> refusable_;
  std::unique_ptr<ClusterState> state_;
  std::map<std::string, std::string> sessions_;
  CountingObserver observer_;
};

TEST_F(ClusterStateTest, JobRunsToSuccessAndFreesDevices) {
  Register("a", 2);
  Register("b", 2);
  auto job = state_->Submit(Spec(2, 2), "");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), pb::JOB_STATE_PENDING);
  state_->Tick();
  pb::Job j = Job(job->id());
  ASSERT_EQ(j.state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(j.generation(), 1u);
  EXPECT_EQ(j.launch_plan_size(), 2);
  EXPECT_EQ(j.rendezvous_endpoint(), "127.0.0.1:29500");
  ASSERT_EQ(Orders("a").launches_size(), 1);
  EXPECT_EQ(Orders("a").launches(0).plan().node(), "a");
  EXPECT_EQ(FreeDevices("a"), 0);

  ASSERT_TRUE(Heartbeat("a", {Proc(j.id(), 1, true)}).ok());
  EXPECT_EQ(Job(j.id()).state(), pb::JOB_STATE_SCHEDULED);  // b not started yet
  ASSERT_TRUE(Heartbeat("b", {Proc(j.id(), 1, true)}).ok());
  EXPECT_EQ(Job(j.id()).state(), pb::JOB_STATE_RUNNING);

  ASSERT_TRUE(Heartbeat("a", {Proc(j.id(), 1, false, 0)}).ok());
  EXPECT_EQ(Job(j.id()).state(), pb::JOB_STATE_RUNNING);
  ASSERT_TRUE(Heartbeat("b", {Proc(j.id(), 1, false, 0)}).ok());
  EXPECT_EQ(Job(j.id()).state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Orders("a").launches_size(), 0);  // the agent may now forget the process
  EXPECT_EQ(FreeDevices("a"), 2);
  EXPECT_EQ(FreeDevices("b"), 2);
}

// Issue 19: heartbeats arriving together are applied in batches under one acquisition of the
// state lock; each caller still gets its own answer and every report is applied.
TEST_F(ClusterStateTest, HeartbeatsSentTogetherEachGetTheirOwnAnswerAndAllApply) {
  constexpr int kNodes = 16;
  std::map<std::string, std::string> job_on;  // node -> the job placed there
  for (int i = 0; i < kNodes; ++i) Register(absl::StrCat("n", i), 2);
  std::vector<std::string> ids;
  for (int i = 0; i < kNodes; ++i) {
    auto job = state_->Submit(Spec(1, 2), "");
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  state_->Tick();
  for (int i = 0; i < kNodes; ++i) {
    const std::string node = absl::StrCat("n", i);
    const pb::Orders orders = Orders(node);
    ASSERT_EQ(orders.launches_size(), 1) << node;
    job_on[node] = orders.launches(0).job_id();
  }
  auto report = [&](const std::string& node, bool live_session, bool running) {
    pb::HeartbeatRequest req;
    req.set_node_name(node);
    req.set_session_id(live_session ? sessions_[node] : "a-session-long-gone");
    *req.add_processes() = Proc(job_on[node], 1, running, 0);
    return state_->Heartbeat(req).status();
  };
  std::atomic<int> wrong_answers{0};
  auto send_all = [&](bool running) {
    std::vector<std::thread> senders;
    for (int t = 0; t < 8; ++t) {
      senders.emplace_back([&, t] {
        for (int round = 0; round < 100; ++round) {
          for (int i = t; i < kNodes; i += 8) {
            const std::string node = absl::StrCat("n", i);
            if (!report(node, true, running).ok()) ++wrong_answers;
            if (!absl::IsNotFound(report(node, false, running))) ++wrong_answers;
          }
        }
      });
    }
    for (std::thread& s : senders) s.join();
  };
  send_all(/*running=*/true);
  EXPECT_EQ(wrong_answers.load(), 0);
  for (const std::string& id : ids) EXPECT_EQ(Job(id).state(), pb::JOB_STATE_RUNNING) << id;
  send_all(/*running=*/false);
  EXPECT_EQ(wrong_answers.load(), 0);
  for (const std::string& id : ids) EXPECT_EQ(Job(id).state(), pb::JOB_STATE_SUCCEEDED) << id;
}

TEST_F(ClusterStateTest, CancelHoldsDevicesUntilTheAgentConfirmsTheKill) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  ASSERT_TRUE(state_->Cancel(job->id(), "user asked").ok());
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_CANCELLED);
  pb::Orders orders = Orders("a");
  EXPECT_EQ(orders.launches_size(), 0);
  ASSERT_EQ(orders.kills_size(), 1);
  EXPECT_EQ(orders.kills(0).job_id(), job->id());
  // Still running on the node: the cards stay held.
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  EXPECT_EQ(FreeDevices("a"), 0);
  auto next = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  EXPECT_EQ(Job(next->id()).state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(Job(next->id()).reason(), "Unschedulable");
  // The process exits: cards free, the next job is placed.
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, false, 143)}).ok());
  EXPECT_EQ(FreeDevices("a"), 2);
  state_->Tick();
  EXPECT_EQ(Job(next->id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_CANCELLED);  // the exit code changes nothing
  EXPECT_EQ(state_->Cancel(job->id(), "").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClusterStateTest, NonZeroExitRestartsTheGangThenFails) {
  Register("a", 2);
  Register("b", 2);
  auto job = state_->Submit(Spec(2, 2, /*max_restarts=*/1), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  ASSERT_TRUE(Heartbeat("b", {Proc(job->id(), 1, false, 1)}).ok());
  pb::Job j = Job(job->id());
  EXPECT_EQ(j.state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(j.restart_count(), 1);
  EXPECT_EQ(Orders("a").kills_size(), 1);  // the surviving rank is stopped
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, false, 143)}).ok());
  state_->Tick();
  j = Job(job->id());
  ASSERT_EQ(j.state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(j.generation(), 2u);
  EXPECT_EQ(Orders("a").launches(0).plan().env().at("HETPOOL_RESTART_COUNT"), "1");
  // A late report for the old generation changes nothing.
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, false, 1), Proc(job->id(), 2, true)}).ok());
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_SCHEDULED);
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 2, false, 2)}).ok());
  j = Job(job->id());
  EXPECT_EQ(j.state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(j.reason(), "NonZeroExit");
  EXPECT_NE(j.message().find("exited with code 2"), std::string::npos);
}

// Issue 60, item 2: leases run on the monotonic clock. With hetpoold's wall clock stepped back an
// hour (libfaketime, monotonic untouched), an agent killed with SIGKILL stayed Ready for the hour:
// a dead node kept its jobs and received new ones.
// The job streams' hubs (one for watches, one for logs) each hear every job that changed: a
// second listener used to replace the first, and watches then saw a change only at their
// half-second token check.
TEST_F(ClusterStateTest, EveryJobListenerHearsEachChangeUntilItLeaves) {
  std::vector<std::string> watches, logs;
  const int watching = state_->WatchJobs([&](const std::string& id) { watches.push_back(id); });
  const int reading = state_->WatchJobs([&](const std::string& id) { logs.push_back(id); });
  EXPECT_NE(watching, reading);
  auto first = state_->Submit(Spec(1, 1), "");
  auto second = state_->Submit(Spec(1, 1), "");
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(state_->Cancel(first->id(), "test").ok());
  ASSERT_FALSE(watches.empty());
  EXPECT_EQ(watches.back(), first->id());
  EXPECT_EQ(watches, logs);
  state_->UnwatchJobs(watching);
  const size_t heard = watches.size();
  ASSERT_TRUE(state_->Cancel(second->id(), "test").ok());
  EXPECT_EQ(watches.size(), heard);
  EXPECT_EQ(logs.back(), second->id());
  state_->UnwatchJobs(reading);
}

TEST_F(ClusterStateTest, AWallClockSteppedBackDoesNotStretchALease) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  // The wall clock goes back an hour; 11 s pass; the agent is silent.
  now_ -= absl::Hours(1);
  steady_offset_ += absl::Hours(1) + absl::Seconds(11);
  state_->Tick();
  EXPECT_EQ(state_->GetNode("a")->state(), pb::NODE_STATE_NOT_READY) << "a silent node kept its lease";
  steady_offset_ += absl::Seconds(20);  // past the orphan grace, on the monotonic clock alone
  state_->Tick();
  EXPECT_EQ(Job(job->id()).reason(), "NodeLost");
}

// And a wall clock stepped forward does not cut one short.
TEST_F(ClusterStateTest, AWallClockSteppedForwardDoesNotCutALeaseShort) {
  Register("a", 2);
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {}).ok());
  now_ += absl::Hours(1);
  steady_offset_ -= absl::Hours(1) - absl::Seconds(1);
  state_->Tick();
  EXPECT_EQ(state_->GetNode("a")->state(), pb::NODE_STATE_READY);
}

TEST_F(ClusterStateTest, LapsedLeaseLosesTheNodeAndItsJobs) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  now_ += absl::Seconds(11);
  state_->Tick();
  EXPECT_EQ(state_->GetNode("a")->state(), pb::NODE_STATE_NOT_READY);
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);  // the agent keeps it for the grace
  now_ += absl::Seconds(20);
  state_->Tick();
  pb::Job j = Job(job->id());
  EXPECT_EQ(j.state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(j.reason(), "NodeLost");
  // The old session is gone; the agent must register and report what still runs.
  EXPECT_EQ(Heartbeat("a", {}).code(), absl::StatusCode::kNotFound);
  Register("a", 2, {Proc(job->id(), 1, true)});
  pb::Orders orders = Orders("a");
  ASSERT_EQ(orders.kills_size(), 1);  // a leftover of a failed job is stopped, its cards held
  EXPECT_EQ(FreeDevices("a"), 0);
  ASSERT_TRUE(Heartbeat("a", {}).ok());
  EXPECT_EQ(FreeDevices("a"), 2);
}

TEST_F(ClusterStateTest, RestartedDaemonReadoptsRunningJobs) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "req-1");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  ASSERT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);
  auto pending = state_->Submit(Spec(1, 2), "");

  Open();  // a new daemon process on the same store
  EXPECT_EQ(state_->GetNode("a")->state(), pb::NODE_STATE_NOT_READY);
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(Job(pending->id()).state(), pb::JOB_STATE_PENDING);
  // Idempotent submission survives the restart too.
  EXPECT_EQ(state_->Submit(Spec(1, 2), "req-1")->id(), job->id());
  Register("a", 2, {Proc(job->id(), 1, true)});
  state_->Tick();
  pb::Job j = Job(job->id());
  EXPECT_EQ(j.state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(j.generation(), 1u);  // adopted, not restarted
  EXPECT_EQ(Orders("a").launches_size(), 1);
  EXPECT_EQ(Job(pending->id()).state(), pb::JOB_STATE_PENDING);  // the cards are still in use
  auto third = state_->Submit(Spec(1, 1), "");
  EXPECT_EQ(third->id(), "job-000003");  // ids continue after the restart
}

// Issue 19: a restart keeps finished jobs as their stored bytes. They come back whole when asked
// for, and with queues configured what they ran still counts in their group's past usage.
TEST_F(ClusterStateTest, FinishedJobsComeBackWholeAndKeepTheirUsageAfterARestart) {
  queues_ = *QueueConfig::Parse(R"({"usage_half_life": "1h"})");
  Open();
  Register("a", 2);
  pb::JobSpec spec = Spec(1, 2);
  spec.set_group("vision");
  auto job = state_->Submit(spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  now_ += absl::Minutes(30);
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, false, 0)}).ok());
  const pb::Job before = Job(job->id());
  ASSERT_EQ(before.state(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_GT(before.events_size(), 2);
  auto decayed = [&] {
    const pb::ListQueuesResponse queues = state_->ListQueues();
    for (const auto& q : queues.queues()) {
      if (q.group() == "vision") return q.decayed_usage();
    }
    return -1.0;
  };
  state_->Tick();
  const double used = decayed();
  EXPECT_GT(used, 0.5);  // 2 cards for half an hour, with a half-life of an hour

  Open();  // a new daemon process on the same store
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Job(job->id()), before))
      << Job(job->id()).DebugString();
  auto page = state_->ListJobs(pb::ListJobsRequest());
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs_size(), 1);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(page->jobs(0), before));
  state_->Tick();
  EXPECT_NEAR(decayed(), used, used * 0.01);
}

// A preemptor's hold on its victim's cards is stored with it: a restarted daemon keeps waiting for
// the victim's processes to stop instead of stopping another job for the same room.
TEST_F(ClusterStateTest, APreemptorWaitsForItsVictimAcrossARestartAndStopsNoOther) {
  preemption_ = PreemptionMode::kPriority;
  Open();
  Register("a", 4);
  auto first = state_->Submit(Spec(1, 2), "");
  auto second = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(first->id(), 1, true), Proc(second->id(), 1, true)}).ok());
  ASSERT_EQ(Job(first->id()).state(), pb::JOB_STATE_RUNNING);
  ASSERT_EQ(Job(second->id()).state(), pb::JOB_STATE_RUNNING);
  now_ += absl::Seconds(5);  // within the lease
  pb::JobSpec urgent = Spec(1, 2);
  urgent.set_priority(10);
  auto high = state_->Submit(urgent, "");
  state_->Tick();
  const bool first_stopped = Job(first->id()).reason() == "Preempted";
  const std::string victim = first_stopped ? first->id() : second->id();
  const std::string other = first_stopped ? second->id() : first->id();
  ASSERT_EQ(Job(victim).reason(), "Preempted");
  ASSERT_EQ(Job(other).state(), pb::JOB_STATE_RUNNING);
  ASSERT_EQ(Job(high->id()).hold().waiting_for_size(), 1);

  Open();  // a new daemon on the same store, while the victim's processes still stop
  Register("a", 4, {Proc(victim, 1, true), Proc(other, 1, true)});
  state_->Tick();
  now_ += absl::Seconds(1);
  state_->Tick();
  EXPECT_EQ(Job(other).state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(Job(other).preemption_count(), 0) << Job(other).message();
  EXPECT_EQ(Job(high->id()).state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(Job(high->id()).pending().preempting(), victim);

  // The victim's processes are gone: the preemptor takes its cards, and its hold goes.
  ASSERT_TRUE(Heartbeat("a", {Proc(victim, 1, false), Proc(other, 1, true)}).ok());
  state_->Tick();
  EXPECT_EQ(Job(high->id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_FALSE(Job(high->id()).has_hold());
  EXPECT_EQ(Job(other).state(), pb::JOB_STATE_RUNNING);
}

TEST_F(ClusterStateTest, RestartedDaemonFailsJobsWhoseNodeNeverReturns) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  Open();
  now_ += absl::Seconds(11);
  state_->Tick();
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);  // past the lease, within the orphan grace
  now_ += absl::Seconds(20);
  state_->Tick();
  EXPECT_EQ(Job(job->id()).reason(), "NodeLost");
}

TEST_F(ClusterStateTest, AgentWithoutTheProcessAfterLaunchFailsTheJob) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  ASSERT_TRUE(Heartbeat("a", {}).ok());  // acted on the orders, but the process is gone
  EXPECT_EQ(Job(job->id()).reason(), "ProcessLost");
}

TEST_F(ClusterStateTest, CpuOnlyNodesRunCpuJobs) {
  Register("cpu-node", 0);
  auto spec = Spec(1, 0);
  spec.set_procs_per_node(4);
  spec.mutable_requirements()->add_vendors("cpu");
  auto job = state_->Submit(spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  state_->Tick();
  pb::Job j = Job(job->id());
  ASSERT_EQ(j.state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(j.vendor(), "cpu");
  EXPECT_EQ(j.launch_plan(0).env().at("HETPOOL_DIST_BACKEND"), "gloo");
  EXPECT_EQ(j.launch_plan(0).env().at("CUDA_VISIBLE_DEVICES"), "");
  // A device job cannot go to a CPU-only pool.
  EXPECT_EQ(state_->Submit(Spec(1, 1), "").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClusterStateTest, DrainedNodesTakeNoNewWork) {
  Register("a", 2);
  ASSERT_TRUE(state_->SetDrained("a", true).ok());
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_PENDING);
  EXPECT_NE(Job(job->id()).message().find("free"), std::string::npos);
  ASSERT_TRUE(state_->SetDrained("a", false).ok());
  state_->Tick();
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(state_->SetDrained("nope", true).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterStateTest, SubmitRefusesShapesNoNodeCanHold) {
  // With no node known yet, any shape waits.
  EXPECT_TRUE(state_->Submit(Spec(1, 8), "").ok());
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 8), "");
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(job.status().message()).find("devices_per_node"), std::string::npos);
  auto list = state_->ListJobs({});
  EXPECT_EQ(list->jobs_size(), 1);  // nothing stored for the refused one
}

TEST_F(ClusterStateTest, WhatThePoolCouldEverHoldFollowsItsLastingInventory) {
  // The answer is remembered per shape; a node that comes, or a lasting change of a node's
  // inventory, asks again.
  Register("a", 2);
  EXPECT_EQ(state_->Submit(Spec(1, 8), "").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state_->Submit(Spec(1, 8), "").status().code(), absl::StatusCode::kFailedPrecondition);
  Register("b", 8);
  EXPECT_TRUE(state_->Submit(Spec(1, 8), "").ok());
  // b loses half its cards (a lasting change reported by a heartbeat): eight no longer fit.
  ASSERT_TRUE(Heartbeat("b", {}, Inventory(4)).ok());
  EXPECT_EQ(state_->Submit(Spec(1, 8), "").status().code(), absl::StatusCode::kFailedPrecondition);
  // Utilisation alone changes nothing lasting: four still fit, eight still do not.
  pb::NodeInventory busy = Inventory(4);
  for (auto& d : *busy.mutable_devices()) d.set_utilization_percent(90);
  ASSERT_TRUE(Heartbeat("b", {}, busy).ok());
  EXPECT_TRUE(state_->Submit(Spec(1, 4), "").ok());
  EXPECT_EQ(state_->Submit(Spec(1, 8), "").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClusterStateTest, SubmitRefusesWhatNoCardCanRunWithTheReason) {
  Register("a", 2, {}, "A100");
  auto spec = Spec(1, 1);
  spec.mutable_requirements()->add_precisions("fp8");
  auto job = state_->Submit(spec, "");
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(job.status().message()).find("nvidia A100 sm_80: lacks fp8"), std::string::npos)
      << job.status();
  spec = Spec(1, 1);
  spec.mutable_requirements()->mutable_code()->add_cuda_sass("sm_90a");
  job = state_->Submit(spec, "");
  EXPECT_NE(std::string(job.status().message()).find("cubin sm_90a does not run on sm_80"), std::string::npos)
      << job.status();
  spec = Spec(1, 1);
  spec.mutable_requirements()->mutable_code()->add_cuda_ptx("compute_80");
  spec.mutable_requirements()->add_precisions("bf16");
  EXPECT_TRUE(state_->Submit(spec, "").ok());
  EXPECT_EQ(state_->ListJobs({})->jobs_size(), 1);
}

TEST_F(ClusterStateTest, UnhealthyCardsReportedByHeartbeatAreNotScheduled) {
  Register("a", 2);
  pb::HeartbeatRequest hb;
  hb.set_node_name("a");
  hb.set_session_id(sessions_["a"]);
  *hb.mutable_inventory() = state_->GetNode("a")->inventory();
  hb.mutable_inventory()->mutable_devices(1)->set_healthy(false);
  hb.mutable_inventory()->mutable_devices(1)->set_health_message("nvmlDeviceGetUUID: GPU is lost");
  ASSERT_TRUE(state_->Heartbeat(hb).ok());
  EXPECT_FALSE(state_->GetNode("a")->inventory().devices(1).healthy());
  auto job = state_->Submit(Spec(1, 2), "");
  ASSERT_TRUE(job.ok());
  state_->Tick();
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_PENDING);  // one healthy card left
  auto classes = state_->ListFingerprints();
  ASSERT_EQ(classes.size(), 1u);
  EXPECT_EQ(classes[0].total(), 2);
  EXPECT_EQ(classes[0].unhealthy(), 1);
  EXPECT_EQ(classes[0].free(), 1);
  EXPECT_EQ(classes[0].nodes(0), "a");
  // A malformed inventory is refused and changes nothing.
  pb::HeartbeatRequest bad = hb;
  bad.mutable_inventory()->mutable_devices(0)->set_vendor("amd");
  EXPECT_EQ(state_->Heartbeat(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->GetNode("a")->inventory().devices(0).vendor(), "nvidia");
  // Utilisation alone is kept in memory, not written: after a restart the health change is there,
  // the utilisation reading is not.
  hb.mutable_inventory()->mutable_devices(0)->set_utilization_percent(87);
  ASSERT_TRUE(state_->Heartbeat(hb).ok());
  EXPECT_EQ(state_->GetNode("a")->inventory().devices(0).utilization_percent(), 87);
  Open();
  EXPECT_FALSE(state_->GetNode("a")->inventory().devices(1).healthy());
  EXPECT_NE(state_->GetNode("a")->inventory().devices(0).utilization_percent(), 87);
}

TEST_F(ClusterStateTest, FractionalJobsShareADeviceAndAreAccounted) {
  Register("a", 2);
  auto half = Spec(1, 1);
  half.set_device_milli(500);
  auto j1 = state_->Submit(half, "");
  auto j2 = state_->Submit(half, "");
  auto whole = state_->Submit(Spec(1, 1), "");
  auto big_share = Spec(1, 1);
  big_share.set_device_milli(600);
  auto j4 = state_->Submit(big_share, "");
  ASSERT_TRUE(j1.ok() && j2.ok() && whole.ok() && j4.ok());
  state_->Tick();
  // The two halves share one card (best fit keeps the other whole for the whole-card job).
  EXPECT_EQ(Job(j1->id()).placement(0).device_ids(0), Job(j2->id()).placement(0).device_ids(0));
  EXPECT_EQ(Job(j1->id()).placement(0).device_milli(), 500);
  EXPECT_EQ(Job(j1->id()).placement(0).device_memory_mib(), 40960u);  // half of 80 GiB
  EXPECT_EQ(Job(whole->id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_NE(Job(whole->id()).placement(0).device_ids(0), Job(j1->id()).placement(0).device_ids(0));
  EXPECT_EQ(Job(j4->id()).state(), pb::JOB_STATE_PENDING);  // 600 fits on neither card now
  // Why it waits, in fields: the shape, that waiting helps, and which filter turned node a away.
  const pb::PendingReason why = Job(j4->id()).pending();
  EXPECT_EQ(why.needs(), "1 node x 600/1000 of a device") << Job(j4->id()).DebugString();
  EXPECT_FALSE(why.never_fits());
  EXPECT_EQ(why.nodes_rejected().at("Capacity"), 1);
  EXPECT_EQ(why.held_for_it(), "a");
  EXPECT_NE(Job(j4->id()).message().find("600/1000 of a device free"), std::string::npos) << Job(j4->id()).message();
  const pb::Job first = Job(j1->id());
  const auto& env = first.launch_plan(0).env();
  EXPECT_EQ(env.at("HETPOOL_DEVICE_MILLI"), "500");
  EXPECT_EQ(env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_EQ(env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=40960M");  // MPS's cap on its memory share
  // The cores and memory node near its card, for a confining agent (both cards on node 0).
  EXPECT_EQ(first.launch_plan(0).cpus(), first.placement(0).device_ids(0) == "nvidia0" ? "0-3" : "4-7");
  EXPECT_EQ(first.launch_plan(0).numa_nodes(), "0");
  auto devices = state_->ListDevices("a", "");
  ASSERT_TRUE(devices.ok());
  int shared = 0;
  for (const auto& d : *devices) {
    if (d.allocated_milli() == 1000 && d.allocated_to().find(',') != std::string::npos) ++shared;
  }
  EXPECT_EQ(shared, 1);
  // A restarted daemon keeps the shares.
  Open();
  Register("a", 2, {Proc(j1->id(), 1, true), Proc(j2->id(), 1, true), Proc(whole->id(), 1, true)});
  state_->Tick();
  EXPECT_EQ(Job(j4->id()).state(), pb::JOB_STATE_PENDING);
  auto after = state_->ListDevices("a", "");
  int full = 0;
  for (const auto& d : *after) full += d.allocated_milli() == 1000;
  EXPECT_EQ(full, 2);
}

TEST_F(ClusterStateTest, GangsArePlacedWholeSoTwoNeverHoldPartsAndWait) {
  Register("a", 2);
  Register("b", 2);
  Register("c", 2);
  auto g1 = state_->Submit(Spec(2, 2), "");
  auto g2 = state_->Submit(Spec(2, 2), "");
  state_->Tick();
  EXPECT_EQ(Job(g1->id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Job(g2->id()).state(), pb::JOB_STATE_PENDING);
  // The waiting gang holds nothing: the third node's cards stay free for anyone else.
  int held = 0;
  for (const auto& node : {"a", "b", "c"}) {
    const auto devices = state_->ListDevices(node, "");  // kept alive for the loop below
    ASSERT_TRUE(devices.ok());
    for (const auto& d : *devices) held += !d.allocated_to().empty();
  }
  EXPECT_EQ(held, 4);
  // It is first in line, though: node c is held for it, so a job that would delay it waits too.
  EXPECT_NE(Job(g2->id()).message().find("first in line: holding"), std::string::npos) << Job(g2->id()).message();
  auto single = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  EXPECT_EQ(Job(single->id()).state(), pb::JOB_STATE_PENDING);
  // The Reservation filter says so in its pending reason.
  EXPECT_EQ(Job(single->id()).pending().nodes_rejected().at("Reservation"), 1) << Job(single->id()).DebugString();
  EXPECT_NE(Job(single->id()).message().find("held for the job first in line"), std::string::npos)
      << Job(single->id()).message();
  // When the first gang ends, the second gets both of its nodes at once, and the single job the third.
  const pb::Job first = Job(g1->id());
  for (const auto& p : first.placement()) ASSERT_TRUE(Heartbeat(p.node(), {Proc(g1->id(), 1, false, 0)}).ok());
  state_->Tick();
  const pb::Job second = Job(g2->id());
  EXPECT_EQ(second.state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(second.placement_size(), 2);
  EXPECT_EQ(Job(single->id()).state(), pb::JOB_STATE_SCHEDULED);
}

TEST_F(ClusterStateTest, BackfillUsesOnlyWhatTheHeadOfTheQueueCannot) {
  const std::string on_a = OneBusyCardOnAAndB();
  // The head needs a whole node (2 cards); each node has one card free.
  auto head = Spec(1, 2);
  head.set_priority(10);
  auto h = state_->Submit(head, "");
  auto small = state_->Submit(Spec(1, 1), "");
  state_->Tick();
  const pb::Job waiting = Job(h->id());
  EXPECT_EQ(waiting.state(), pb::JOB_STATE_PENDING);
  EXPECT_NE(waiting.message().find("holding a for it"), std::string::npos) << waiting.message();
  // The small job backfills onto b, not onto a, which the head is waiting for.
  const pb::Job backfilled = Job(small->id());
  ASSERT_EQ(backfilled.state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(backfilled.placement(0).node(), "b");
  // a's running job ends: the head gets node a at once.
  ASSERT_TRUE(Heartbeat("a", {Proc(on_a, 1, false, 0)}).ok());
  state_->Tick();
  const pb::Job started = Job(h->id());
  EXPECT_EQ(started.state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(started.placement(0).node(), "a");
}

// A pass starts from the last pass's views (only changed nodes copied again): the cards the
// last pass marked held for a head of the queue must not stay held once that head is gone.
TEST_F(ClusterStateTest, CardsHeldForAHeadThatLeftAreFreeInTheNextPass) {
  OneBusyCardOnAAndB();
  auto head = Spec(1, 2);
  head.set_priority(10);
  auto h = state_->Submit(head, "");
  state_->Tick();
  ASSERT_NE(Job(h->id()).message().find("holding a for it"), std::string::npos) << Job(h->id()).message();
  auto small = state_->Submit(Spec(1, 1), "");
  state_->Tick();
  ASSERT_EQ(Job(small->id()).placement(0).node(), "b");  // a's free card is held for the head
  ASSERT_TRUE(state_->Cancel(h->id(), "not needed").ok());
  auto next = state_->Submit(Spec(1, 1), "");
  state_->Tick();
  const pb::Job placed = Job(next->id());
  ASSERT_EQ(placed.state(), pb::JOB_STATE_SCHEDULED) << placed.message();
  EXPECT_EQ(placed.placement(0).node(), "a");
}

TEST_F(ClusterStateTest, ListJobsFiltersAndPages) {
  for (int i = 0; i < 5; ++i) {
    auto spec = Spec(1, 1);
    if (i % 2) spec.set_user("bob");
    (*spec.mutable_labels())["team"] = i < 3 ? "nlp" : "cv";
    ASSERT_TRUE(state_->Submit(spec, "").ok());
  }
  pb::ListJobsRequest req;
  req.set_page_size(2);
  std::vector<std::string> ids;
  do {
    auto page = state_->ListJobs(req);
    ASSERT_TRUE(page.ok());
    for (const auto& j : page->jobs()) ids.push_back(j.id());
    req.set_page_token(page->next_page_token());
  } while (!req.page_token().empty());
  EXPECT_EQ(ids.size(), 5u);
  pb::ListJobsRequest by_user;
  by_user.set_user("bob");
  (*by_user.mutable_labels())["team"] = "nlp";
  EXPECT_EQ(state_->ListJobs(by_user)->jobs_size(), 1);
  pb::ListJobsRequest bad;
  bad.set_page_token("garbage");
  EXPECT_EQ(state_->ListJobs(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state_->GetJob("job-999999").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterStateTest, RegisterValidatesInput) {
  pb::RegisterRequest req;
  req.set_node_name("../x");
  EXPECT_EQ(state_->Register(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_node_name("a");
  req.set_address("127.0.0.1");
  req.set_torchrun_path("/usr/bin/torchrun");
  req.set_work_dir("/tmp/a");
  auto* d = req.mutable_inventory()->add_devices();
  d->set_id("x0");
  d->set_vendor("amd");
  EXPECT_EQ(state_->Register(req).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(state_->ListNodes().empty());  // nothing half-registered
}

TEST_F(ClusterStateTest, ReRegisteringWithANewInventoryKeepsRunningJobs) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 1), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  Register("a", 4, {Proc(job->id(), 1, true)});
  EXPECT_EQ(state_->GetNode("a")->inventory().devices_size(), 4);
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(Job(job->id()).generation(), 1u);
  EXPECT_EQ(FreeDevices("a"), 3);
}

}  // namespace
}  // namespace hetpool::daemon

namespace hetpool::daemon {
namespace {

// Issue 14, item 10: a change the store refuses is neither acknowledged nor applied.
TEST_F(ClusterStateTest, CancelThatCannotBeStoredFailsAndChangesNothing) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  ASSERT_TRUE(job.ok());
  state_->Tick();
  ASSERT_EQ(Job(job->id()).state(), pb::JOB_STATE_SCHEDULED);
  refusable_->refuse = true;
  auto cancelled = state_->Cancel(job->id(), "");
  EXPECT_TRUE(absl::IsUnavailable(cancelled.status())) << cancelled.status();
  EXPECT_NE(cancelled.status().message().find("disk is full"), absl::string_view::npos);
  EXPECT_FALSE(state_->store_healthy());
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Orders("a").kills_size(), 0);  // nothing was acted on either
  EXPECT_EQ(Orders("a").launches_size(), 1);
  // Space returns: the same call works, and a restart finds what was acknowledged.
  refusable_->refuse = false;
  ASSERT_TRUE(state_->Cancel(job->id(), "").ok());
  EXPECT_TRUE(state_->store_healthy());
  Open();
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_CANCELLED);
}

TEST_F(ClusterStateTest, ReportsThatCannotBeStoredAreAppliedWhenTheAgentSendsThemAgain) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  ASSERT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);
  refusable_->refuse = true;
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, false, 0)}).ok());
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);  // not SUCCEEDED in memory only
  EXPECT_EQ(FreeDevices("a"), 0);                            // the claim stays for the retry
  refusable_->refuse = false;
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, false, 0)}).ok());
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_SUCCEEDED);
  Open();  // a restart does not run it a second time
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_SUCCEEDED);
}

TEST_F(ClusterStateTest, LostNodeWhoseFailureCannotBeStoredIsRetriedAtTheNextLeaseCheck) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2, /*max_restarts=*/0), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  refusable_->refuse = true;
  now_ += absl::Seconds(31);
  state_->Tick();
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);
  refusable_->refuse = false;
  state_->Tick();  // leases are looked at every 100 ms at most: not yet
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_RUNNING);
  now_ += absl::Milliseconds(100);
  state_->Tick();
  EXPECT_EQ(Job(job->id()).state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(Job(job->id()).reason(), "NodeLost");
}

// A node that registers while no lease is due (the look is put off until one can lapse) is still
// found silent at its lease's end: a registration brings the next look forward.
TEST_F(ClusterStateTest, ANodeRegisteringWhenNoLeaseIsDueIsStillFoundSilentAtItsLeasesEnd) {
  state_->Tick();  // no node: the next look is put off indefinitely
  now_ += absl::Minutes(5);
  state_->Tick();
  Register("a", 1);
  now_ += absl::Seconds(5);
  state_->Tick();
  EXPECT_EQ(state_->GetNode("a")->state(), pb::NODE_STATE_READY);
  now_ += absl::Seconds(6);  // 11 s of silence, past the 10 s lease
  state_->Tick();
  EXPECT_EQ(state_->GetNode("a")->state(), pb::NODE_STATE_NOT_READY);
}

// Issue 19: a growing fleet's heartbeats are spread out to stay within
// --max-heartbeats-per-second (each is a gRPC call, most of an idle daemon's CPU), never to
// fewer than three a lease; agents registered earlier learn the new period from their next answer.
TEST_F(ClusterStateTest, AgentsAreToldToBeatLessOftenAsTheFleetGrowsButThreeTimesALeaseAtLeast) {
  max_heartbeats_per_second_ = 2;  // the fixture's agents are asked every 2 s; the lease is 10 s
  Open();
  auto told = [&](const std::string& node) -> int64_t {
    pb::HeartbeatRequest req;
    req.set_node_name(node);
    req.set_session_id(sessions_[node]);
    auto resp = state_->Heartbeat(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->heartbeat_interval_ms() : -1;
  };
  pb::RegisterRequest req;
  req.set_node_name("n0");
  req.set_address("127.0.0.1");
  req.set_torchrun_path("/usr/bin/torchrun");
  req.set_work_dir("/tmp/n0");
  *req.mutable_inventory() = Inventory(1);
  auto first = state_->Register(req);
  ASSERT_TRUE(first.ok()) << first.status();
  sessions_["n0"] = first->session_id();
  EXPECT_EQ(first->heartbeat_interval_ms(), 2000);  // one node: the configured period
  for (int i = 1; i < 5; ++i) Register("n" + std::to_string(i), 1);
  EXPECT_EQ(told("n0"), 2500);  // 5 nodes at 2 a second
  for (int i = 5; i < 10; ++i) Register("n" + std::to_string(i), 1);
  EXPECT_EQ(told("n0"), 3333);  // 10 nodes would be 5 s: a third of the lease at most
  EXPECT_EQ(told("n9"), 3333);

  max_heartbeats_per_second_ = 0;  // no cap
  Open();
  Register("n0", 1);
  EXPECT_EQ(told("n0"), 2000);
}

TEST_F(ClusterStateTest, SubmissionThatCannotBeStoredIsRefusedAndItsIdNeverReused) {
  Register("a", 2);
  refusable_->refuse = true;
  auto refused = state_->Submit(Spec(1, 2), "");
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  refusable_->refuse = false;
  auto job = state_->Submit(Spec(1, 2), "");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->id(), "job-000002");
}

// Issue 14, item 11: ids continue above the store's recorded floor, also when rows are missing.
TEST_F(ClusterStateTest, JobIdsContinueAboveTheStoresRecordedHighest) {
  ASSERT_TRUE(store_->RaiseHighestJobSeq(500).ok());
  Open();
  Register("a", 1);
  auto job = state_->Submit(Spec(1, 1), "");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id(), "job-000501");
}

// Issue 14, item 12: a control-plane outage shorter than the grace kills nothing. The node goes
// NotReady at its lease, keeps its claims, and its agent re-registering with the processes still
// running gets them back, same generation, no restart.
TEST_F(ClusterStateTest, NodeSilentPastItsLeaseButWithinTheGraceKeepsItsJobs) {
  Register("a", 2);
  auto job = state_->Submit(Spec(1, 2, /*max_restarts=*/3), "");
  state_->Tick();
  ASSERT_TRUE(Heartbeat("a", {Proc(job->id(), 1, true)}).ok());
  now_ += absl::Seconds(25);
  state_->Tick();
  EXPECT_EQ(state_->GetNode("a")->state(), pb::NODE_STATE_NOT_READY);
  EXPECT_EQ(FreeDevices("a"), 0);  // still held: nothing else may land on those cards
  Register("a", 2, {Proc(job->id(), 1, true)});
  state_->Tick();
  const pb::Job j = Job(job->id());
  EXPECT_EQ(j.state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(j.generation(), 1u);
  EXPECT_EQ(j.restart_count(), 0);
  EXPECT_EQ(Orders("a").kills_size(), 0);
  auto registered = state_->Register([] {
    pb::RegisterRequest req;
    req.set_node_name("probe");
    req.set_address("127.0.0.1");
    req.set_torchrun_path("/usr/bin/torchrun");
    req.set_work_dir("/tmp/probe");
    return req;
  }());
  ASSERT_TRUE(registered.ok());
  EXPECT_EQ(registered->orphan_grace_ms(), 20000);  // what agents fence by
}

// Issue 14, item 3: idempotency keys belong to the user who sent them.
TEST_F(ClusterStateTest, RequestIdsArePerUserAndAReusedKeyMustMeanTheSameJob) {
  Register("a", 2);
  pb::JobSpec alice = Spec(1, 1);
  alice.mutable_env()->insert({"WANDB_API_KEY", "alice-secret"});
  auto first = state_->Submit(alice, "run-1");
  ASSERT_TRUE(first.ok());
  pb::JobSpec bob = Spec(1, 1);
  bob.set_user("bob");
  auto bobs = state_->Submit(bob, "run-1");
  ASSERT_TRUE(bobs.ok());
  EXPECT_NE(bobs->id(), first->id());  // his own job, not hers (nor her environment)
  EXPECT_EQ(bobs->spec().env().count("WANDB_API_KEY"), 0u);
  auto retry = state_->Submit(alice, "run-1");
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->id(), first->id());
  pb::JobSpec changed = alice;
  changed.set_nnodes(2);
  changed.set_devices_per_node(1);
  auto conflict = state_->Submit(changed, "run-1");
  EXPECT_TRUE(absl::IsAlreadyExists(conflict.status())) << conflict.status();
  Open();  // keys survive a restart, per user
  auto after = state_->Submit(bob, "run-1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->id(), bobs->id());
}

// Issue 14, item 14: a restarted generation never gets the port its predecessor may still hold,
// and a one-node job needs none.
TEST_F(ClusterStateTest, RestartedGenerationsGetAnotherRendezvousPortAndOneNodeJobsNone) {
  Register("a", 4);
  Register("b", 4);
  auto single = state_->Submit(Spec(1, 1), "");
  auto gang = state_->Submit(Spec(2, 1, /*max_restarts=*/1), "");
  state_->Tick();
  EXPECT_EQ(Job(single->id()).rendezvous_endpoint(), "");
  const pb::Job g1 = Job(gang->id());
  ASSERT_EQ(g1.state(), pb::JOB_STATE_SCHEDULED);
  const std::string node0 = g1.placement(0).node();
  const std::string node1 = g1.placement(1).node();
  ASSERT_TRUE(Heartbeat(node0, {Proc(gang->id(), 1, true)}).ok());
  ASSERT_TRUE(Heartbeat(node1, {Proc(gang->id(), 1, false, 1)}).ok());
  ASSERT_EQ(Job(gang->id()).state(), pb::JOB_STATE_PENDING);
  // Rank 0 of generation 1 is still stopping (reported running) when generation 2 is placed.
  state_->Tick();
  const pb::Job g2 = Job(gang->id());
  ASSERT_EQ(g2.generation(), 2u);
  EXPECT_NE(g2.rendezvous_endpoint(), g1.rendezvous_endpoint());
  EXPECT_FALSE(g2.rendezvous_endpoint().empty());
}

// Issue 14, item 9: a node writes only the logs of generations it ran.
TEST_F(ClusterStateTest, LogPushesComeOnlyFromTheNodesAGenerationRanOn) {
  Register("a", 2);
  Register("b", 2);
  auto job = state_->Submit(Spec(1, 2), "");
  state_->Tick();
  const std::string placed = Job(job->id()).placement(0).node();
  const std::string other = placed == "a" ? "b" : "a";
  EXPECT_TRUE(state_->CheckLogPush(placed, sessions_[placed], job->id(), 1).ok());
  auto refused = state_->CheckLogPush(other, sessions_[other], job->id(), 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_FALSE(state_->CheckLogPush(placed, sessions_[placed], job->id(), 2).ok());
}

// Issue 19, item 3: a finished job past --retain-finished leaves the live table and the store's
// live set (a restart does not load it) into the archive, where `get` and usage accounting still
// find it; job ids never come back; with --archive drop it is gone. A failed archive write keeps
// the job live.
TEST_F(ClusterStateTest, FinishedJobsPastTheirRetentionAreArchivedOutOfTheLiveTables) {
  retain_finished_ = absl::Hours(1);
  Open();
  Register("a", 2);
  Register("b", 2);
  // Finishes `id` on the node it was placed on.
  auto finish = [&](const std::string& id) {
    state_->Tick();
    const std::string node = Job(id).placement(0).node();
    ASSERT_TRUE(Heartbeat(node, {Proc(id, 1, true)}).ok());
    ASSERT_TRUE(Heartbeat(node, {Proc(id, 1, false, 0)}).ok());
    ASSERT_EQ(Job(id).state(), pb::JOB_STATE_SUCCEEDED);
  };
  auto done = state_->Submit(Spec(1, 2), "");
  ASSERT_TRUE(done.ok()) << done.status();
  finish(done->id());
  // Placed but never started: it fails when its node goes silent (the clock jumps below), an
  // hour after the first job ended, so it is live while the first is retired.
  auto running = state_->Submit(Spec(1, 2), "");
  ASSERT_TRUE(running.ok());
  state_->Tick();
  auto listed = [&] {
    std::vector<std::string> ids;
    auto page = state_->ListJobs(pb::ListJobsRequest());
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) return ids;
    for (const auto& j : page->jobs()) ids.push_back(j.id());
    return ids;
  };
  now_ += absl::Minutes(59);
  state_->Tick();
  EXPECT_EQ(listed().size(), 2u) << "not yet past its retention";

  now_ += absl::Minutes(2);
  refusable_->refuse = true;
  state_->Tick();
  refusable_->refuse = false;
  EXPECT_EQ(listed().size(), 2u) << "the archive write failed: the job stays live";
  now_ += absl::Minutes(1);  // the next sweep
  state_->Tick();
  EXPECT_EQ(listed(), std::vector<std::string>{running->id()});
  auto archived = state_->GetJob(done->id());
  ASSERT_TRUE(archived.ok()) << archived.status();
  EXPECT_EQ(archived->state(), pb::JOB_STATE_SUCCEEDED);
  const auto used = state_->JobsRunningSince(now_ - absl::Hours(24), "");
  EXPECT_TRUE(std::any_of(used.begin(), used.end(), [&](const pb::Job& j) { return j.id() == done->id(); }))
      << "usage still counts it";

  Open();  // a restart loads the live set only
  EXPECT_EQ(listed(), std::vector<std::string>{running->id()});
  EXPECT_TRUE(state_->GetJob(done->id()).ok());

  archive_finished_ = false;  // --archive drop
  Open();
  Register("a", 2);
  Register("b", 2);
  auto next = state_->Submit(Spec(1, 2), "");
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->submit_seq(), running->submit_seq());
  finish(next->id());
  now_ += absl::Hours(2);
  state_->Tick();
  EXPECT_EQ(state_->GetJob(next->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(listed().empty()) << "the second job ended over an hour ago too";
}

// Issue 15, item 6: agents resend their inventory whenever utilisation moves; only a lasting
// change may cost a pass over the whole queue.
TEST_F(ClusterStateTest, OnlyLastingInventoryChangesWakeTheQueue) {
  Register("a", 2);
  auto running = state_->Submit(Spec(1, 2), "");
  ASSERT_TRUE(running.ok());
  state_->Tick();
  const std::vector<pb::ProcessStatus> still_running = {Proc(running->id(), 1, true)};
  auto waiting = state_->Submit(Spec(1, 2), "");  // a's two cards are taken
  ASSERT_TRUE(waiting.ok());
  state_->Tick();  // offers the new job once
  const int offered = observer_.decisions;
  const int passes = observer_.full_passes + observer_.new_passes;
  EXPECT_GT(passes, 0) << "passes are reported (hetpool_scheduling_pass_seconds)";
  state_->Tick();
  EXPECT_EQ(observer_.decisions, offered) << "nothing changed, yet the queue was scanned";

  pb::NodeInventory busy = Inventory(2);
  for (auto& d : *busy.mutable_devices()) {
    d.set_utilization_percent(97);
    d.set_memory_used_mib(60000);
  }
  ASSERT_TRUE(Heartbeat("a", still_running, busy).ok());
  state_->Tick();
  EXPECT_EQ(observer_.decisions, offered) << "a utilisation change woke the scheduler";
  auto devices = state_->ListDevices("a", "");
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->at(0).device().utilization_percent(), 97) << "the new figures are still shown";

  pb::NodeInventory unhealthy = busy;
  unhealthy.mutable_devices(1)->set_healthy(false);
  ASSERT_TRUE(Heartbeat("a", still_running, unhealthy).ok());
  state_->Tick();
  EXPECT_EQ(observer_.decisions, offered + 1) << "a card's health is lasting: the waiting job is offered again";
  EXPECT_EQ(Job(waiting->id()).state(), pb::JOB_STATE_PENDING);
}

// Issue 15, item 3: host CPU and memory are scheduled; CPU-only jobs hold them too.
TEST_F(ClusterStateTest, HostCpuAndMemoryAreScheduledForCpuJobsToo) {
  Register("a", 0);  // 16 cores, 64 GiB
  auto cpu_job = [this](int64_t cores, uint64_t memory_mib) {
    pb::JobSpec spec = Spec(1, 0);
    spec.set_procs_per_node(4);
    spec.mutable_host()->set_cpu_milli_per_process(cores * 1000 / 4);
    spec.mutable_host()->set_memory_mib_per_node(memory_mib);
    return state_->Submit(spec, "");
  };
  auto too_big = cpu_job(17, 0);
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(too_big.status())) << too_big.status();
  EXPECT_NE(too_big.status().message().find("needs 17000 milli-CPU; the node has 16000"), std::string::npos)
      << too_big.status();
  auto first = cpu_job(12, 16384);
  auto second = cpu_job(8, 16384);  // 12 + 8 > 16 cores: waits for the first
  ASSERT_TRUE(first.ok() && second.ok());
  state_->Tick();
  EXPECT_EQ(Job(first->id()).state(), pb::JOB_STATE_SCHEDULED);
  const pb::Job waiting = Job(second->id());
  EXPECT_EQ(waiting.state(), pb::JOB_STATE_PENDING);
  EXPECT_NE(waiting.message().find("HostResources"), std::string::npos) << waiting.message();
  // The first ends: its cores come back and the second runs.
  pb::ProcessStatus done = Proc(first->id(), 1, false, 0);
  done.clear_device_ids();
  ASSERT_TRUE(Heartbeat("a", {done}).ok());
  state_->Tick();
  EXPECT_EQ(Job(first->id()).state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Job(second->id()).state(), pb::JOB_STATE_SCHEDULED);
}

// Issue 15, item 2: the queue order is the policy's (the profile's QueueSort plugin).
TEST_F(ClusterStateTest, TheQueueGoesInThePolicysOrder) {
  Register("a", 1);
  auto low = state_->Submit(Spec(1, 1), "");
  auto high_spec = Spec(1, 1);
  high_spec.set_priority(5);
  auto high = state_->Submit(high_spec, "");  // submitted second, offered first
  ASSERT_TRUE(low.ok() && high.ok());
  state_->Tick();
  EXPECT_EQ(Job(high->id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(Job(low->id()).state(), pb::JOB_STATE_PENDING);
}

}  // namespace
}  // namespace hetpool::daemon
