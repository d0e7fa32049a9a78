// Sweeps at Slurm's pace (issue 63). A job of one node and one process starts without torchrun,
// straight from the agent, with the variables torchrun would give it, and keeps what torchrun
// gave it (confinement, logs, its own exit and last lines).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

const std::string kTutorials = std::string(HETPOOL_SOURCE_DIR) + "/tests/integration/scripts/tutorial/";

class DirectLaunch : public ExamplePoolSuite {};

// Whether the plan starts torchrun: its program, or its flags (the tutorial's script is named
// multigpu_torchrun.py).
bool MentionsTorchrun(const pb::NodeLaunchPlan& plan) {
  if (plan.argv_size() > 0 && absl::EndsWith(plan.argv(0), "torchrun")) return true;
  for (const auto& arg : plan.argv()) {
    if (arg == "--nproc_per_node" || arg == "--rdzv_endpoint") return true;
  }
  return false;
}

// The DDP tutorial's torchrun script (LOCAL_RANK, init_process_group("nccl") from env://, a
// snapshot every epoch) on one card: started without torchrun, it finds every variable it reads.
TEST_F(DirectLaunch, TheTorchrunTutorialRunsOnOneCardWithoutTorchrun) {
  TempDir work;
  std::filesystem::permissions(work.path(), std::filesystem::perms::all);
  pb::JobSpec spec;
  spec.set_user("tester");
  spec.mutable_python()->set_script(kTutorials + "multigpu_torchrun.py");
  for (const char* arg : {"2", "1", "32"}) spec.mutable_python()->add_args(arg);
  spec.set_working_dir(work.path());
  spec.set_nnodes(1);
  spec.set_devices_per_node(1);
  spec.mutable_requirements()->add_vendors("nvidia");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status() << cluster_->AgentLog(0) << cluster_->AgentLog(1);
  ASSERT_EQ(done->launch_plan_size(), 1);
  const pb::NodeLaunchPlan& plan = done->launch_plan(0);
  EXPECT_EQ(plan.launcher(), "direct");
  EXPECT_FALSE(MentionsTorchrun(plan)) << plan.DebugString();
  ASSERT_GE(plan.argv_size(), 3);
  EXPECT_EQ(plan.argv(1), "-u");
  EXPECT_EQ(plan.argv(2), kTutorials + "multigpu_torchrun.py");
  EXPECT_TRUE(std::filesystem::exists(work.path() + "/snapshot.pt"));
  // Its untagged output is rank 0's, for a reader of the whole log and of rank 0 alike.
  auto all = cluster_->Logs(done->id());
  ASSERT_TRUE(all.ok()) << all.status();
  const std::string node = done->placement(0).node();
  EXPECT_NE(all->find(absl::StrCat("[", node, " r0] [GPU0] Epoch 1 | Steps: ")), std::string::npos) << *all;
  auto rank0 = cluster_->Logs(done->id(), 0);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  EXPECT_NE(rank0->find("Training snapshot saved at snapshot.pt"), std::string::npos) << *rank0;
}

// The process is the agent's own child, with torchrun's variables, its cards and a free
// MASTER_PORT; a program named without a path is found on the job's PATH.
TEST_F(DirectLaunch, TheProcessIsTheAgentsChildWithTorchrunsVariables) {
  pb::JobSpec spec = cluster_->ShellSpec(
      "echo parent=$(cat /proc/$PPID/comm); "
      "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE "
      "GROUP_RANK=$GROUP_RANK ROLE_RANK=$ROLE_RANK MASTER_ADDR=$MASTER_ADDR; "
      "echo port=$MASTER_PORT cards=$CUDA_VISIBLE_DEVICES$MLU_VISIBLE_DEVICES$MACA_VISIBLE_DEVICES");
  spec.mutable_command(0)->assign("sh");  // looked up on the job's PATH
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status() << cluster_->AgentLog(0) << cluster_->AgentLog(1);
  EXPECT_EQ(done->launch_plan(0).launcher(), "direct");
  auto out = cluster_->Logs(done->id());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("parent=hetpool-agent"), std::string::npos) << *out;
  EXPECT_NE(out->find("RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 ROLE_RANK=0 "
                      "MASTER_ADDR=127.0.0.1"),
            std::string::npos)
      << *out;
  EXPECT_EQ(out->find("port= "), std::string::npos) << *out;  // a port was given
  EXPECT_EQ(out->find("cards=\n"), std::string::npos) << *out;
  ASSERT_EQ(done->placement(0).global_ranks_size(), 1);
  EXPECT_EQ(done->placement(0).global_ranks(0), 0);
}

// Its exit is its own (torchrun exits 1 whatever its worker did): the code, a signal by name,
// and its last lines, read without torchrun's report.
TEST_F(DirectLaunch, AFailureKeepsItsOwnExitCodeSignalAndLastLines) {
  auto job = cluster_->Submit(cluster_->ShellSpec("echo loading; echo 'ValueError: bad shape' >&2; exit 3"));
  ASSERT_TRUE(job.ok()) << job.status();
  auto failed = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(60));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->failure().exit_code(), 3);
  EXPECT_EQ(failed->failure().global_rank(), 0);
  ASSERT_GE(failed->failure().last_lines_size(), 2) << failed->failure().DebugString();
  EXPECT_EQ(failed->failure().last_lines(failed->failure().last_lines_size() - 1), "ValueError: bad shape");
  std::string out;
  EXPECT_EQ(cluster_->RunCli({"get", failed->id()}, &out), 0) << out;
  EXPECT_NE(out.find("exited with code 3"), std::string::npos) << out;

  auto killed = cluster_->Submit(cluster_->ShellSpec("echo about to crash; kill -SEGV $$"));
  ASSERT_TRUE(killed.ok()) << killed.status();
  auto crashed = cluster_->WaitForState(killed->id(), pb::JOB_STATE_FAILED, absl::Seconds(60));
  ASSERT_TRUE(crashed.ok()) << crashed.status();
  EXPECT_EQ(crashed->failure().signal(), "SIGSEGV") << crashed->failure().DebugString();
}

TEST_F(DirectLaunch, AProgramNotOnThePathFailsSayingSo) {
  pb::JobSpec spec = cluster_->ShellSpec("");
  spec.clear_command();
  spec.add_command("no-such-program-for-hetpool");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto failed = cluster_->WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(60));
  ASSERT_TRUE(failed.ok()) << failed.status();
  std::string out;
  cluster_->RunCli({"get", failed->id()}, &out);
  EXPECT_NE(out.find("cannot execute no-such-program-for-hetpool: No such file or directory"), std::string::npos)
      << out;
}

// "launcher": "torchrun" keeps torchrun for a one-process job; "direct" is refused for more
// than one process, saying why.
TEST_F(DirectLaunch, TheLauncherCanBeChosenAndDirectIsRefusedForMoreThanOneProcess) {
  pb::JobSpec spec = cluster_->ShellSpec("echo RANK=$RANK");
  spec.set_launcher("torchrun");
  auto job = cluster_->Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster_->WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->launch_plan(0).launcher(), "torchrun");
  EXPECT_TRUE(MentionsTorchrun(done->launch_plan(0)));

  pb::JobSpec two = cluster_->ShellSpec("true");
  two.set_launcher("direct");
  two.set_procs_per_node(2);
  auto refused = cluster_->Submit(two);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "launcher: direct starts one process on one node"))
      << refused.status();
  pb::JobSpec typo = cluster_->ShellSpec("true");
  typo.set_launcher("drect");
  auto unknown = cluster_->Submit(typo);
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "must be auto, direct or torchrun")) << unknown.status();
}

// Job arrays, as a sweep submits them: one `hetpoolctl submit --array`, each task a job of its
// own with HETPOOL_ARRAY_INDEX, shown, waited for and cancelled together or one by one.
class JobArrays : public ExamplePoolSuite {
 protected:
  // A job file running `script` under /bin/sh as a one-process CPU job in `dir`.
  static std::string JobFile(const std::string& dir, const std::string& script) {
    const std::string path = dir + "/job.json";
    std::ofstream(path) << nlohmann::json{{"command", {"/bin/sh", "-c", script}},
                                          {"working_dir", dir},
                                          {"nnodes", 1},
                                          {"devices_per_node", 0},
                                          {"procs_per_node", 1},
                                          {"requirements", {{"vendors", {"cpu"}}}}}
                               .dump();
    return path;
  }
  static std::string Submit(const std::string& file, const std::string& array) {
    std::string out;
    EXPECT_EQ(cluster_->RunCli({"submit", "-f", file, "--array", array}, &out), 0) << out;
    return out.substr(0, out.find('\n'));
  }
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(JobArrays, EachTaskRunsWithItsIndexAndAtMostMaxRunningAtOnce) {
  TempDir work;
  // Each task says how many tasks were between their start and their end when it started.
  const std::string id = Submit(JobFile(work.path(),
                                        "touch running.$HETPOOL_ARRAY_INDEX; n=$(ls running.* | wc -l); "
                                        "echo index=$HETPOOL_ARRAY_INDEX count=$HETPOOL_ARRAY_COUNT concurrent=$n "
                                        "> out.$HETPOOL_ARRAY_INDEX; sleep 0.3; rm running.$HETPOOL_ARRAY_INDEX"),
                                "0-5%2");
  ASSERT_FALSE(id.empty());
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 0) << out;
  for (int index = 0; index < 6; ++index) {
    const std::string said = ReadText(absl::StrCat(work.path(), "/out.", index));
    EXPECT_TRUE(absl::StartsWith(said, absl::StrCat("index=", index, " count=6 concurrent="))) << said;
    const int concurrent = std::atoi(said.substr(said.find("concurrent=") + 11).c_str());
    EXPECT_GE(concurrent, 1) << said;
    EXPECT_LE(concurrent, 2) << said;  // %2
  }
  ASSERT_EQ(cluster_->RunCli({"get", id}, &out), 0) << out;
  EXPECT_NE(out.find("state:       SUCCEEDED"), std::string::npos) << out;
  EXPECT_NE(out.find("placement:   6 tasks: 6 succeeded"), std::string::npos) << out;
  EXPECT_NE(out.find("6 tasks, at most 2 running at once"), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"get", id + ".4"}, &out), 0) << out;
  EXPECT_NE(out.find(absl::StrCat("task 4 of ", id, " (6 tasks)")), std::string::npos) << out;
  EXPECT_NE(out.find("HETPOOL_ARRAY_INDEX=4"), std::string::npos) << out;
  // One line for the array in `list`, none for its tasks.
  ASSERT_EQ(cluster_->RunCli({"list", "--all"}, &out), 0) << out;
  EXPECT_NE(out.find(id + " "), std::string::npos) << out;
  EXPECT_EQ(out.find(id + "."), std::string::npos) << out;
}

// The array fails as its first failed task did, and `wait` says so with that task's class.
TEST_F(JobArrays, AFailedTaskFailsTheArrayWithItsOwnClass) {
  TempDir work;
  const std::string id =
      Submit(JobFile(work.path(), "if [ $HETPOOL_ARRAY_INDEX = 1 ]; then echo 'ValueError: bad' >&2; exit 3; fi"), "3");
  std::string out;
  const int array_exit = cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out);
  EXPECT_NE(array_exit, 0) << out;
  EXPECT_EQ(cluster_->RunCli({"wait", id + ".1", "--timeout", "120s"}, &out), array_exit) << out;
  EXPECT_EQ(cluster_->RunCli({"wait", id + ".0", "--timeout", "120s"}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"get", id}, &out), 0) << out;
  EXPECT_NE(out.find("state:       FAILED"), std::string::npos) << out;
  EXPECT_NE(out.find(absl::StrCat("the first to fail, ", id, ".1")), std::string::npos) << out;
  EXPECT_NE(out.find("3 tasks: 2 succeeded, 1 failed"), std::string::npos) << out;
}

// One task that has not started, then the array with the one that runs.
TEST_F(JobArrays, TasksAreCancelledOneByOneOrWithTheArray) {
  TempDir work;
  const std::string id = Submit(JobFile(work.path(), "exec sleep 600"), "0-2%1");
  ASSERT_TRUE(cluster_->WaitForState(id + ".0", pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"cancel", id + ".2"}, &out), 0) << out;  // not released yet
  auto task2 = cluster_->Get(id + ".2");
  ASSERT_TRUE(task2.ok()) << task2.status();
  EXPECT_EQ(task2->state(), pb::JOB_STATE_CANCELLED);
  ASSERT_EQ(cluster_->RunCli({"cancel", id}, &out), 0) << out;
  ASSERT_TRUE(cluster_->WaitForState(id + ".0", pb::JOB_STATE_CANCELLED, absl::Seconds(30)).ok());
  auto array = cluster_->WaitForState(id, pb::JOB_STATE_CANCELLED, absl::Seconds(30));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_TRUE(Eventually([&] { return cluster_->JobProcesses(id + ".0").empty(); }, absl::Seconds(30)));
  EXPECT_EQ(cluster_->Get(id + ".1").status().code(), absl::StatusCode::kNotFound);  // never released
  EXPECT_NE(cluster_->RunCli({"submit", "-f", work.path() + "/job.json", "--array", "5-9"}, &out), 0);
  EXPECT_NE(out.find("tasks are numbered from 0"), std::string::npos) << out;
}

}  // namespace
}  // namespace hetpool::testing
