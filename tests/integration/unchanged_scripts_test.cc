// Unchanged scripts (issue 62): training scripts written the way public PyTorch tutorials write
// them (cuda and nccl hard-coded, set_device, DDP(device_ids=...), a snapshot in the working
// dir) run as submitted on the simulated pool, on GPU and CPU jobs alike: the agent's launch
// adapter maps what the node cannot run. On a Cambricon node the vendor's own GPU migration is
// switched on (the fake torch_mlu records it).
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

const std::string kTutorials = std::string(HETPOOL_SOURCE_DIR) + "/tests/integration/scripts/tutorial/";

class UnchangedScripts : public ExamplePoolSuite {};

// A job running `script` as submitted, in a working dir of its own (the snapshot lands there).
pb::JobSpec TutorialJob(const std::string& script, const std::string& working_dir, std::vector<std::string> args) {
  pb::JobSpec spec;
  spec.set_user("tester");
  spec.mutable_python()->set_script(kTutorials + script);
  for (auto& a : args) spec.mutable_python()->add_args(std::move(a));
  spec.set_working_dir(working_dir);
  return spec;
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
  pb::JobSpec spec = TutorialJob("multigpu_torchrun.py", work.path(), {"2", "1", "32"});
  spec.set_nnodes(2);
  spec.set_devices_per_node(2);
  spec.mutable_requirements()->add_vendors("nvidia");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << cluster_->AgentLog(0) << cluster_->AgentLog(1);
  EXPECT_TRUE(std::filesystem::exists(work.path() + "/snapshot.pt"));  // saved to the working dir
  const auto notes = StartedNotes(*done);
  ASSERT_EQ(notes.size(), 2u);
  for (const auto& note : notes) EXPECT_NE(note.find("adapted: cuda→cpu, nccl→gloo"), std::string::npos) << note;
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"logs", job->id()}, &out), 0) << out;
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
  pb::JobSpec spec = TutorialJob("ddp_example.py", work.path(), {});
  spec.set_nnodes(1);
  spec.set_devices_per_node(0);
  spec.set_procs_per_node(2);
  spec.mutable_requirements()->add_vendors("cpu");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << cluster_->AgentLog(0);
  const auto notes = StartedNotes(*done);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("adapted: cuda→cpu, nccl→gloo"), std::string::npos) << notes[0];
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"logs", job->id()}, &out), 0) << out;
  EXPECT_NE(out.find("Finished running basic DDP example on rank 1."), std::string::npos) << out;
}

// With "adapt": false the script runs as written: on simulated cards its nccl cannot start.
TEST_F(UnchangedScripts, AJobThatTurnsTheAdapterOffRunsAsWritten) {
  TempDir work;
  pb::JobSpec spec = TutorialJob("ddp_example.py", work.path(), {});
  spec.set_nnodes(1);
  spec.set_devices_per_node(1);
  spec.mutable_requirements()->add_vendors("nvidia");
  spec.set_adapt(false);
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  const auto notes = StartedNotes(*done);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes[0].find("not adapted (the job's \"adapt\": false)"), std::string::npos) << notes[0];
}

TEST_F(UnchangedScripts, OnACambriconNodeTheVendorsGpuMigrationIsSwitchedOn) {
  TempDir work, marks;
  pb::JobSpec spec = TutorialJob("ddp_example.py", work.path(), {});
  spec.set_nnodes(1);
  spec.set_devices_per_node(2);
  spec.mutable_requirements()->add_vendors("cambricon");
  // torch_mlu as a Cambricon node has it installed (here a fake that records its migration).
  (*spec.mutable_env())["PYTHONPATH"] = std::string(HETPOOL_SOURCE_DIR) + "/tests/fakes/python";
  (*spec.mutable_env())["FAKE_TORCH_MLU_MARKS"] = marks.path();
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
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
  pb::JobSpec spec = TutorialJob("resume_or_fail.py", work.path(), {"no-such-snapshot.pt"});
  spec.set_nnodes(1);
  spec.set_devices_per_node(0);
  spec.set_procs_per_node(2);
  spec.mutable_requirements()->add_vendors("cpu");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  const std::string own = "RuntimeError: File no-such-snapshot.pt cannot be opened";
  EXPECT_EQ(done->failure().global_rank(), 0) << done->failure().DebugString();
  ASSERT_GT(done->failure().last_lines_size(), 0);
  EXPECT_EQ(done->failure().last_lines(done->failure().last_lines_size() - 1), own);
  for (const auto& line : done->failure().last_lines()) {
    EXPECT_EQ(line.find("Connection closed by peer"), std::string::npos) << line;  // rank 1's
  }
  std::string out;
  EXPECT_EQ(cluster_->RunCli({"get", job->id()}, &out), 0) << out;
  EXPECT_NE(out.find("  | " + own), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"wait", job->id()}, &out), 3) << out;
  EXPECT_NE(out.find(own), std::string::npos) << out;
  const std::string report = work.path() + "/junit.xml";
  EXPECT_EQ(cluster_->RunCli({"wait", job->id(), "--junit", report}, &out), 3) << out;
  std::ifstream xml_file(report);
  const std::string xml((std::istreambuf_iterator<char>(xml_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find(own + "</failure>"), std::string::npos) << xml;
}

// A job that exits at once (CI's fast failure) still has its ranks' logs: `logs --rank 0` returns
// rank 0's line, though no agent saw its workers alive.
TEST_F(UnchangedScripts, LogsOfARankOfAJobThatExitsAtOnce) {
  TempDir work;
  pb::JobSpec spec = TutorialJob("resume_or_fail.py", work.path(), {"no-such-snapshot.pt"});
  spec.set_nnodes(1);
  spec.set_devices_per_node(0);
  spec.set_procs_per_node(2);
  spec.mutable_requirements()->add_vendors("cpu");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(120)).ok());
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"logs", job->id(), "--rank", "0"}, &out), 0) << out;
  EXPECT_NE(out.find("r0] RuntimeError: File no-such-snapshot.pt cannot be opened"), std::string::npos) << out;
  EXPECT_EQ(out.find("Connection closed by peer"), std::string::npos) << out;  // rank 1's
}

}  // namespace
}  // namespace hetpool::testing
