// Unchanged scripts (issue 62): training scripts written the way public PyTorch tutorials write
// them (cuda and nccl hard-coded, set_device, DDP(device_ids=...), a snapshot in the working
// dir) run as submitted on the simulated pool, on GPU and CPU jobs alike: the agent's launch
// adapter maps what the node cannot run. On a Cambricon node the vendor's own GPU migration is
// switched on (the fake torch_mlu records it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

const std::string kTutorials = std::string(HETPOOL_SOURCE_DIR) + "/tests/integration/scripts/tutorial/";

class UnchangedScripts : public ExamplePoolSuite {};

// Nodes x cards (x processes per node, when not one per card) of one vendor.
struct Shape {
  int nnodes = 1;
  int devices = 0;
  int procs = 0;  // 0: one per card
  std::string vendor = "cpu";
};

// A job running `script` as submitted, in a working dir of its own (the snapshot lands there).
pb::JobSpec TutorialJob(const std::string& script, const std::string& working_dir, std::vector<std::string> args,
                        const Shape& shape) {
  pb::JobSpec spec;
  spec.set_user("tester");
  spec.mutable_python()->set_script(kTutorials + script);
  for (auto& a : args) spec.mutable_python()->add_args(std::move(a));
  spec.set_working_dir(working_dir);
  spec.set_nnodes(shape.nnodes);
  spec.set_devices_per_node(shape.devices);
  if (shape.procs > 0) spec.set_procs_per_node(shape.procs);
  spec.mutable_requirements()->add_vendors(shape.vendor);
  return spec;
}

// Two ranks on one node: rank 0 cannot open its snapshot and fails first, rank 1 in turn.
pb::JobSpec RankZeroFailsFirst(const std::string& working_dir) {
  return TutorialJob("resume_or_fail.py", working_dir, {"no-such-snapshot.pt"},
                     Shape{.nnodes = 1, .devices = 0, .procs = 2, .vendor = "cpu"});
}

// Submits `spec` and waits until it is in `state`.
absl::StatusOr<pb::Job> RunUntil(TestCluster& cluster, const pb::JobSpec& spec, pb::JobState state) {
  auto job = cluster.Submit(spec);
  if (!job.ok()) return job.status();
  return cluster.WaitForState(job->id(), state, absl::Seconds(120));
}

std::vector<std::string> StartedNotes(const pb::Job& job) {
  std::vector<std::string> notes;
  for (const auto& e : job.events()) {
    if (e.reason() == "NodeStarted") notes.push_back(e.message());
  }
  return notes;
}

TEST_F(UnchangedScripts, TheDdpTutorialRunsAsAGpuJobOnTwoNodesOfTwoCards) {
  TempDir work;
  std::filesystem::permissions(work.path(), std::filesystem::perms::all);
  pb::JobSpec spec = TutorialJob("multigpu_torchrun.py", work.path(), {"2", "1", "32"},
                                 Shape{.nnodes = 2, .devices = 2, .procs = 0, .vendor = "nvidia"});
  auto done = RunUntil(*cluster_, spec, pb::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(done.ok()) << done.status() << cluster_->AgentLog(0) << cluster_->AgentLog(1);
  EXPECT_TRUE(std::filesystem::exists(work.path() + "/snapshot.pt"));  // saved to the working dir
  const auto notes = StartedNotes(*done);
  ASSERT_EQ(notes.size(), 2u);
  for (const auto& note : notes) EXPECT_NE(note.find("adapted: cuda→cpu, nccl→gloo"), std::string::npos) << note;
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"logs", done->id()}, &out), 0) << out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(out.find(absl::StrCat("[GPU", rank % 2, "] Epoch 1 | Steps: 2")), std::string::npos) << out;
  }
  EXPECT_NE(out.find("Training snapshot saved at snapshot.pt"), std::string::npos) << out;

  // Submitted again, it resumes from the snapshot it left, as the tutorial's does.
  auto again = cluster_->Submit(spec);
  ASSERT_TRUE(again.ok()) << again.status();
  auto resumed = cluster_->WaitForState(again->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(cluster_->RunCli({"logs", again->id()}, &out), 0) << out;
  EXPECT_NE(out.find("Resuming training from snapshot at Epoch 2"), std::string::npos) << out;
}

TEST_F(UnchangedScripts, TheDdpExampleRunsAsACpuJob) {
  TempDir work;
  pb::JobSpec spec =
      TutorialJob("ddp_example.py", work.path(), {}, Shape{.nnodes = 1, .devices = 0, .procs = 2, .vendor = "cpu"});
  auto done = RunUntil(*cluster_, spec, pb::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(done.ok()) << done.status() << cluster_->AgentLog(0);
  const auto notes = StartedNotes(*done);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("adapted: cuda→cpu, nccl→gloo"), std::string::npos) << notes[0];
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"logs", done->id()}, &out), 0) << out;
  EXPECT_NE(out.find("Finished running basic DDP example on rank 1."), std::string::npos) << out;
}

// With "adapt": false the script runs as written: on simulated cards its nccl cannot start.
TEST_F(UnchangedScripts, AJobThatTurnsTheAdapterOffRunsAsWritten) {
  TempDir work;
  pb::JobSpec spec =
      TutorialJob("ddp_example.py", work.path(), {}, Shape{.nnodes = 1, .devices = 1, .procs = 0, .vendor = "nvidia"});
  spec.set_adapt(false);
  auto done = RunUntil(*cluster_, spec, pb::JOB_STATE_FAILED);
  ASSERT_TRUE(done.ok()) << done.status();
  const auto notes = StartedNotes(*done);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes[0].find("not adapted (the job's \"adapt\": false)"), std::string::npos) << notes[0];
}

TEST_F(UnchangedScripts, OnACambriconNodeTheVendorsGpuMigrationIsSwitchedOn) {
  TempDir work, marks;
  pb::JobSpec spec = TutorialJob("ddp_example.py", work.path(), {},
                                 Shape{.nnodes = 1, .devices = 2, .procs = 0, .vendor = "cambricon"});
  // torch_mlu as a Cambricon node has it installed (here a fake that records its migration).
  (*spec.mutable_env())["PYTHONPATH"] = std::string(HETPOOL_SOURCE_DIR) + "/tests/fakes/python";
  (*spec.mutable_env())["FAKE_TORCH_MLU_MARKS"] = marks.path();
  auto done = RunUntil(*cluster_, spec, pb::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(done.ok()) << done.status() << cluster_->AgentLog(0);
  for (const char* rank : {"0", "1"}) {
    std::ifstream mark(marks.path() + "/migrated-" + rank);
    std::string line;
    ASSERT_TRUE(std::getline(mark, line)) << "rank " << rank << " did not switch the migration on";
    EXPECT_EQ(line, "torch imported first");
  }
  const auto notes = StartedNotes(*done);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("cuda→mlu, nccl→cncl (torch_mlu's GPU migration)"), std::string::npos) << notes[0];
}

// Rank 0 fails first (its snapshot cannot be opened); rank 1, in a collective, fails in turn. Every
// report quotes rank 0's own line: its workers' stderr is labelled like their stdout now, so the
// other rank's gloo traceback is not taken for the failure.
TEST_F(UnchangedScripts, AFailureQuotesTheFailingRanksOwnLine) {
  TempDir work;
  pb::JobSpec spec = RankZeroFailsFirst(work.path());
  auto done = RunUntil(*cluster_, spec, pb::JOB_STATE_FAILED);
  ASSERT_TRUE(done.ok()) << done.status();
  const std::string own = "RuntimeError: File no-such-snapshot.pt cannot be opened";
  EXPECT_EQ(done->failure().global_rank(), 0) << done->failure().DebugString();
  ASSERT_GT(done->failure().last_lines_size(), 0);
  EXPECT_EQ(done->failure().last_lines(done->failure().last_lines_size() - 1), own);
  for (const auto& line : done->failure().last_lines()) {
    EXPECT_EQ(line.find("Connection closed by peer"), std::string::npos) << line;  // rank 1's
  }
  std::string out;
  EXPECT_EQ(cluster_->RunCli({"get", done->id()}, &out), 0) << out;
  EXPECT_NE(out.find("  | " + own), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"wait", done->id()}, &out), 3) << out;
  EXPECT_NE(out.find(own), std::string::npos) << out;
  // Python's exception exits 1, hetpoolctl's own "could not do it": CI reads 101.
  EXPECT_EQ(cluster_->RunCli({"wait", done->id(), "--job-exit-code"}, &out), 101) << out;
  const std::string report = work.path() + "/junit.xml";
  EXPECT_EQ(cluster_->RunCli({"wait", done->id(), "--junit", report}, &out), 3) << out;
  std::ifstream xml_file(report);
  const std::string xml((std::istreambuf_iterator<char>(xml_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find(own + "</failure>"), std::string::npos) << xml;
}

// A rank fails while its torchrun waits at its exit barrier for the other node (whose rank is
// still loading data): the agent stops the generation within its --failed-rank-grace (10 s), the
// job ends naming the rank that failed first with its own line, and its cards are free again.
TEST_F(UnchangedScripts, ARankThatFailsWhileTorchrunWaitsEndsTheJobPromptly) {
  TempDir work;
  pb::JobSpec spec = TutorialJob("fails_while_peer_loads.py", work.path(), {},
                                 Shape{.nnodes = 2, .devices = 2, .procs = 1, .vendor = "nvidia"});
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto running = cluster_->WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(120));
  ASSERT_TRUE(running.ok()) << running.status();
  const absl::Time started = absl::Now();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_LT(absl::Now() - started, absl::Seconds(30));  // not torchrun's 300 s barrier
  EXPECT_EQ(done->failure().global_rank(), 0) << done->failure().DebugString();
  EXPECT_EQ(done->failure().exit_code(), 3) << done->failure().DebugString();
  ASSERT_GT(done->failure().last_lines_size(), 0);
  EXPECT_EQ(done->failure().last_lines(done->failure().last_lines_size() - 1), "rank 0: the dataset index is corrupt");
  std::string out;
  EXPECT_EQ(cluster_->RunCli({"get", job->id()}, &out), 0) << out;
  EXPECT_NE(out.find("failure:     rank 0 (local rank 0 on "), std::string::npos) << out;
  EXPECT_NE(out.find("the first rank to fail; the job's other ranks were stopped"), std::string::npos) << out;
  // The cards are free: a job needing every NVIDIA card of the pool runs.
  pb::JobSpec all =
      TutorialJob("ddp_example.py", work.path(), {}, Shape{.nnodes = 2, .devices = 2, .procs = 0, .vendor = "nvidia"});
  auto next = cluster_->Submit(all);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(cluster_->WaitForState(next->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120)).ok());
}

// A job that exits at once (CI's fast failure) still has its ranks' logs: `logs --rank 0` returns
// rank 0's line, though no agent saw its workers alive.
TEST_F(UnchangedScripts, LogsOfARankOfAJobThatExitsAtOnce) {
  TempDir work;
  pb::JobSpec spec = RankZeroFailsFirst(work.path());
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(120)).ok());
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"logs", job->id(), "--rank", "0"}, &out), 0) << out;
  EXPECT_NE(out.find("r0] RuntimeError: File no-such-snapshot.pt cannot be opened"), std::string::npos) << out;
  EXPECT_EQ(out.find("Connection closed by peer"), std::string::npos) << out;  // rank 1's
}

// A working dir the job's account cannot write (most scripts save their checkpoints there) is
// said when the job starts and with its failure, naming the account; a job that writes nothing
// there runs.
TEST(WorkingDir, OneTheJobsAccountCannotWriteIsSaidWithTheAccountsName) {
  if (geteuid() != 0) GTEST_SKIP() << "switching accounts needs an agent running as root";
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);
  options.agents[0].args = {"--run-as", "nobody"};  // after the harness's own flags, so it wins
  TestCluster cluster(options);
  // The agent's work dir (the run dirs under it) must be reachable by the job's account.
  std::filesystem::permissions(cluster.dir(), std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                                  std::filesystem::perms::others_exec);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.DaemonLog();
  TempDir work;  // root's, 0755: nobody enters but cannot write
  std::filesystem::permissions(work.path(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                                std::filesystem::perms::group_exec |
                                                std::filesystem::perms::others_read |
                                                std::filesystem::perms::others_exec);
  const std::string said =
      absl::StrCat("working dir ", work.path(), " is not writable by the job's account nobody (uid ");
  pb::JobSpec saves = cluster.ShellSpec("echo saving; echo state > snapshot.pt");
  saves.set_working_dir(work.path());
  auto job = cluster.Submit(saves);
  ASSERT_TRUE(job.ok()) << job.status();
  auto failed = cluster.WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(60));
  ASSERT_TRUE(failed.ok()) << failed.status() << cluster.AgentLog(0);
  EXPECT_EQ(failed->failure_origin(), pb::FAILURE_ORIGIN_JOB);
  EXPECT_NE(failed->message().find(said), std::string::npos) << failed->message();
  pb::JobSpec reads = cluster.ShellSpec("echo reads only");
  reads.set_working_dir(work.path());
  auto ran = cluster.Submit(reads);
  ASSERT_TRUE(ran.ok()) << ran.status();
  auto done = cluster.WaitForState(ran->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  std::string started;
  for (const auto& e : done->events()) {
    if (e.reason() == "NodeStarted") started = e.message();
  }
  EXPECT_NE(started.find("warning: " + said), std::string::npos) << started;
}

// A socket of this test listening on `port` on every address, as a user's own torchrun would.
class ForeignListener {
 public:
  explicit ForeignListener(int port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    listening_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd_, 4) == 0;
  }
  ~ForeignListener() { close(fd_); }
  bool listening() const { return listening_; }

 private:
  int fd_;
  bool listening_ = false;
};

// Two adjacent ports this host has free now, the first held by a foreign listener.
int HeldPortPair(std::unique_ptr<ForeignListener>& held) {
  for (int tries = 0; tries < 50; ++tries) {
    const int port = FreeTcpPort();
    if (port <= 0 || port >= 65535) continue;
    ForeignListener next(port + 1);
    if (!next.listening()) continue;
    held = std::make_unique<ForeignListener>(port);
    if (held->listening()) return port;
  }
  return 0;
}

pb::JobSpec TwoNodeCpuJob(const std::string& working_dir) {
  pb::JobSpec spec =
      TutorialJob("ddp_example.py", working_dir, {}, Shape{.nnodes = 2, .devices = 0, .procs = 1, .vendor = "cpu"});
  return spec;
}

// Another process on the first port of --rdzv-port-range: the job runs on the next, spending no
// restart; with no port left its failure is the pool's (exit 4), never the job's.
TEST(RendezvousPorts, AForeignListenerOnTheRangesPortSendsTheJobToAnother) {
  std::unique_ptr<ForeignListener> held;
  const int port = HeldPortPair(held);
  ASSERT_GT(port, 0);
  TestCluster::Options options = TestCluster::ExamplePool();
  options.daemon_args = {"--rdzv-port-range", absl::StrCat(port, "-", port + 1)};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_TRUE(cluster.WaitNodesReady(2, absl::Seconds(60)).ok());
  TempDir work;
  auto job = cluster.Submit(TwoNodeCpuJob(work.path()));
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << cluster.DaemonLog();
  EXPECT_EQ(done->restart_count(), 0);
  EXPECT_EQ(done->rendezvous_endpoint(), absl::StrCat("127.0.0.1:", port + 1));
  bool requeued = false;
  for (const auto& e : done->events()) {
    requeued = requeued || (e.reason() == "RendezvousPortTaken" &&
                            e.message().find(absl::StrCat("rendezvous port ", port, " is in use on this node")) !=
                                std::string::npos);
  }
  EXPECT_TRUE(requeued) << done->DebugString();
}

TEST(RendezvousPorts, WithEveryPortOfTheRangeTakenTheFailureIsThePools) {
  std::unique_ptr<ForeignListener> held;
  const int port = HeldPortPair(held);
  ASSERT_GT(port, 0);
  TestCluster::Options options = TestCluster::ExamplePool();
  options.daemon_args = {"--rdzv-port-range", absl::StrCat(port, "-", port)};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_TRUE(cluster.WaitNodesReady(2, absl::Seconds(60)).ok());
  TempDir work;
  auto job = cluster.Submit(TwoNodeCpuJob(work.path()));
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->reason(), "RendezvousPortsExhausted");
  EXPECT_EQ(done->failure_origin(), pb::FAILURE_ORIGIN_INFRASTRUCTURE);
  std::string out;
  EXPECT_EQ(cluster.RunCli({"wait", job->id()}, &out), 4) << out;
  EXPECT_NE(out.find("no free rendezvous port on 127.0.0.1"), std::string::npos) << out;
}

}  // namespace
}  // namespace hetpool::testing
