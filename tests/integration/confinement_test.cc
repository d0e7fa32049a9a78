// Confinement (issue 41), with real agents on this machine's cgroups: what a job starts does
// not outlive it (success, cancel, preemption), its memory ask is the kernel's limit, another
// card's device file is shut to it and it runs on its cards' cores, two users' jobs see neither
// the other's environment nor its /tmp, and a shared account serves one user at a time.
// Skipped, saying why, where the agent cannot confine (not root, no writable cgroups).
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"
#include "tests/testing/eventually.h"

namespace hetpool::testing {
namespace {

// node-a alone, so that every job lands there.
TestCluster::Options OneNode() {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);
  return options;
}

// Starts the cluster; skips the test, saying why, where the agent cannot confine (then the
// caller returns: `if (IsSkipped()) return;`).
void StartConfined(TestCluster& cluster) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: the agent cannot make cgroups";
  ASSERT_TRUE(cluster.Start().ok()) << cluster.DaemonLog();
  const std::string log = cluster.AgentLog(0);
  if (log.find("confining jobs: cgroup") == std::string::npos) {
    GTEST_SKIP() << "the agent does not confine here: " << log.substr(0, 2000);
  }
}

const pb::JobEvent* FindEvent(const pb::Job& job, const std::string& reason) {
  for (const auto& e : job.events()) {
    if (e.reason() == reason) return &e;
  }
  return nullptr;
}

// The issue's three escapes; each leaves a sleep running after the script itself is done.
constexpr const char* kEscapes =
    "setsid sleep 600 & ( ( sleep 600 & ) & ) ; setsid sh -c 'trap \"\" TERM; exec sleep 600' & sleep 0.5; ";

bool NoneLeft(const TestCluster& cluster, const std::string& id, absl::Duration patience) {
  return Eventually([&] { return cluster.JobProcesses(id).empty(); }, patience);
}

TEST(Confinement, NothingAJobStartsOutlivesItsSuccessOrItsCancel) {
  TestCluster cluster(OneNode());
  ASSERT_NO_FATAL_FAILURE(StartConfined(cluster));
  if (IsSkipped()) return;
  // Success: the script exits 0 at once, its three escapes still running.
  auto done = cluster.Submit(cluster.ShellSpec(absl::StrCat(kEscapes, "exit 0")));
  ASSERT_TRUE(done.ok()) << done.status();
  auto finished = cluster.WaitForState(done->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(finished.ok()) << finished.status() << cluster.AgentLog(0);
  // Killed before the exit was reported: nothing to wait for.
  EXPECT_TRUE(cluster.JobProcesses(done->id()).empty());
  const pb::JobEvent* strays = FindEvent(*finished, "StraysKilled");
  ASSERT_NE(strays, nullptr) << finished->DebugString();
  // "node node-a: 3 process(es) the job left running ...": the two setsid escapes at least. The
  // double fork's sleep stays in the job's process group, so the group's SIGTERM may take it
  // before the cgroup is swept (CI under the sanitizers counted 2).
  const size_t count_at = strays->message().find(": ") + 2;
  EXPECT_GE(std::atoi(strays->message().c_str() + count_at), 2) << strays->message();
  EXPECT_NE(strays->message().find("process(es) the job left running"), std::string::npos) << strays->message();
  EXPECT_NE(finished->placement(0).confinement().find("cgroup v"), std::string::npos);

  // Cancel: the escapes run beside the job's own sleep; after the cancel none is left.
  auto cancelled = cluster.Submit(cluster.ShellSpec(absl::StrCat(kEscapes, "exec sleep 600")));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  ASSERT_TRUE(cluster.WaitForState(cancelled->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  ASSERT_GE(cluster.WaitForJobProcesses(cancelled->id(), 5, absl::Seconds(30)).size(), 5u);  // torchrun, sh, 3 escapes
  std::string out;
  ASSERT_EQ(cluster.RunCli({"cancel", cancelled->id()}, &out), 0) << out;
  ASSERT_TRUE(cluster.WaitForState(cancelled->id(), pb::JOB_STATE_CANCELLED, absl::Seconds(60)).ok());
  EXPECT_TRUE(NoneLeft(cluster, cancelled->id(), absl::Seconds(30)))
      << cluster.JobProcesses(cancelled->id()).size() << " left\n"
      << cluster.AgentLog(0);
}

// A job allocating 3 GiB against a 256 MiB ask fails naming memory; a job beside it on the same
// node succeeds.
TEST(Confinement, AJobOverItsMemoryAskFailsNamingMemoryWhileItsNeighbourRuns) {
  TestCluster cluster(OneNode());
  ASSERT_NO_FATAL_FAILURE(StartConfined(cluster));
  if (IsSkipped()) return;
  pb::JobSpec hungry = cluster.ShellSpec("exec python3 -c 'x = bytearray(3 << 30); print(len(x))'");
  hungry.mutable_host()->set_memory_mib_per_node(256);
  auto neighbour = cluster.Submit(cluster.ShellSpec("sleep 2; echo neighbour done"));
  ASSERT_TRUE(neighbour.ok()) << neighbour.status();
  auto job = cluster.Submit(hungry);
  ASSERT_TRUE(job.ok()) << job.status();
  auto failed = cluster.WaitForState(job->id(), pb::JOB_STATE_FAILED, absl::Seconds(90));
  ASSERT_TRUE(failed.ok()) << failed.status() << cluster.AgentLog(0);
  EXPECT_NE(failed->message().find("was killed: out of memory at its 256 MiB host memory ask"), std::string::npos)
      << failed->message();
  EXPECT_EQ(failed->failure_origin(), pb::FAILURE_ORIGIN_JOB);
  auto ok = cluster.WaitForState(neighbour->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// The inventory names a stand-in device file for each card (made here with mknod, numbered as
// harmless kernel devices) and the cores near it: a job opens its own card's file and none of
// the others', and runs on its card's cores, which the launch plan shows.
TEST(Confinement, AJobOpensOnlyItsOwnCardsDeviceFileAndRunsOnItsCardsCores) {
  TestCluster cluster(OneNode());
  if (geteuid() != 0) GTEST_SKIP() << "not root: no mknod, no cgroups";
  const std::string dev = cluster.dir() + "/dev";
  std::filesystem::create_directories(dev);
  nlohmann::json inventory = nlohmann::json::parse(std::ifstream(cluster.InventoryPath(0)));
  // full, random, kmsg, zero: their numbers under other names, none of which torchrun opens
  // (/dev/urandom is: denying it stops the job before it runs).
  const unsigned minors[] = {7, 8, 11, 5};
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_LE(inventory["devices"].size(), 4u);
  for (size_t i = 0; i < inventory["devices"].size(); ++i) {
    const std::string file = absl::StrCat(dev, "/card", inventory["devices"][i].value("index", static_cast<int>(i)));
    ASSERT_EQ(mknod(file.c_str(), S_IFCHR | 0666, makedev(1, minors[i])), 0) << file << ": " << std::strerror(errno);
    inventory["devices"][i]["device_nodes"] = {file};
    inventory["devices"][i]["local_cpus"] = std::to_string(i % cores);
  }
  std::ofstream(cluster.InventoryPath(0)) << inventory.dump(2);
  ASSERT_NO_FATAL_FAILURE(StartConfined(cluster));
  if (IsSkipped()) return;
  pb::JobSpec spec = cluster.ShellSpec(absl::StrCat("for f in ", dev, "/card*; do if (: < $f) 2>/dev/null; then ",
                                                    "echo \"opened $f\"; else echo \"denied $f\"; fi; done; ",
                                                    "grep Cpus_allowed_list /proc/self/status; ",
                                                    "echo \"visible $CUDA_VISIBLE_DEVICES\""));
  spec.mutable_requirements()->add_vendors("nvidia");  // cards 0 and 1: their index is their file's
  auto job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto done = cluster.WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  auto logs = cluster.Logs(job->id());
  ASSERT_TRUE(logs.ok()) << logs.status();
  const size_t at = logs->find("visible ");
  ASSERT_NE(at, std::string::npos) << *logs;
  const std::string visible(absl::StripAsciiWhitespace(logs->substr(at + 8, logs->find('\n', at) - at - 8)));
  int opened = 0, denied = 0;
  for (absl::string_view line : absl::StrSplit(*logs, '\n')) {
    if (absl::StrContains(line, "opened ")) {
      ++opened;
      EXPECT_TRUE(absl::EndsWith(line, absl::StrCat("/card", visible))) << line << " (visible " << visible << ")";
    }
    if (absl::StrContains(line, "denied ")) ++denied;
  }
  EXPECT_EQ(opened, 1) << *logs;
  EXPECT_EQ(denied, static_cast<int>(inventory["devices"].size()) - 1) << *logs;
  // Its card's cores: in the plan, in `get`, and the kernel's word from inside the job.
  const std::string near = std::to_string(std::stoi(visible) % cores);
  EXPECT_EQ(done->launch_plan(0).cpus(), near);
  EXPECT_NE(logs->find("Cpus_allowed_list:\t" + near + "\n"), std::string::npos) << *logs;
  std::string shown;
  ASSERT_EQ(cluster.RunCli({"get", job->id()}, &shown), 0) << shown;
  EXPECT_NE(shown.find("near its cards: cores " + near), std::string::npos) << shown;
  EXPECT_NE(shown.find("confined:    on node-a: cgroup v"), std::string::npos) << shown;
  EXPECT_NE(shown.find(", cores " + near + ","), std::string::npos) << shown;
}

// Preemption ends a generation like a cancel: its escapes go with it, before the job that
// preempted it has the cards.
TEST(Confinement, NothingAPreemptedJobStartedOutlivesItsGeneration) {
  TestCluster::Options options = OneNode();
  options.daemon_args = {"--preemption", "priority"};
  TestCluster cluster(options);
  ASSERT_NO_FATAL_FAILURE(StartConfined(cluster));
  if (IsSkipped()) return;
  // Both of node-a's H100s for each job: the second can only run once the first has stopped.
  auto both_cards = [&](const std::string& script, int priority) {
    pb::JobSpec spec = cluster.ShellSpec(script);
    spec.set_devices_per_node(2);
    spec.mutable_requirements()->add_vendors("nvidia");
    spec.set_priority(priority);
    return spec;
  };
  auto low = cluster.Submit(both_cards(absl::StrCat(kEscapes, "exec sleep 600"), 0));
  ASSERT_TRUE(low.ok()) << low.status();
  ASSERT_TRUE(cluster.WaitForState(low->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  ASSERT_GE(cluster.WaitForJobProcesses(low->id(), 5, absl::Seconds(30)).size(), 5u);
  auto high = cluster.Submit(both_cards("exec sleep 600", 10));
  ASSERT_TRUE(high.ok()) << high.status();
  ASSERT_TRUE(cluster.WaitForState(high->id(), pb::JOB_STATE_RUNNING, absl::Seconds(90)).ok()) << cluster.AgentLog(0);
  // The low job waits for the cards again (generation 2 cannot have started): whatever of it
  // lives now would be generation 1's.
  EXPECT_TRUE(NoneLeft(cluster, low->id(), absl::Seconds(30))) << cluster.JobProcesses(low->id()).size() << " left\n"
                                                               << cluster.AgentLog(0);
  auto preempted = cluster.Get(low->id());
  ASSERT_TRUE(preempted.ok()) << preempted.status();
  EXPECT_EQ(preempted->preemption_count(), 1) << preempted->DebugString();
  std::string out;
  EXPECT_EQ(cluster.RunCli({"cancel", high->id()}, &out), 0) << out;
  EXPECT_EQ(cluster.RunCli({"cancel", low->id()}, &out), 0) << out;
}

// A frozen agent cannot end its jobs; its fence watchdog does, and with them what left their
// process groups (the watchdog kills the group leader's whole job cgroup).
TEST(Confinement, AFrozenAgentsFenceTakesWhatLeftTheJobsProcessGroupToo) {
  TestCluster::Options options = OneNode();
  options.lease_ttl = absl::Seconds(3);
  options.orphan_grace = absl::Seconds(3);
  TestCluster cluster(options);
  ASSERT_NO_FATAL_FAILURE(StartConfined(cluster));
  if (IsSkipped()) return;
  auto job = cluster.Submit(cluster.ShellSpec(absl::StrCat(kEscapes, "exec sleep 600")));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  ASSERT_GE(cluster.WaitForJobProcesses(job->id(), 5, absl::Seconds(30)).size(), 5u);
  cluster.SignalAgent(0, SIGSTOP);  // it can neither answer nor fence; its watchdog is another process
  const bool fenced = NoneLeft(cluster, job->id(), absl::Seconds(60));
  const size_t left = cluster.JobProcesses(job->id()).size();
  cluster.SignalAgent(0, SIGCONT);
  EXPECT_TRUE(fenced) << left << " left\n" << cluster.AgentLog(0);
  const std::string said = "and everything in its job cgroup";
  EXPECT_TRUE(cluster
                  .WaitFor(
                      job->id(), [&](const pb::Job&) { return cluster.AgentLog(0).find(said) != std::string::npos; },
                      absl::Seconds(30))
                  .ok())
      << cluster.AgentLog(0);
}

// An agent whose job dirs leave /tmp out, running each user's jobs as a uid of their own.
void ConfineUsers(TestCluster& cluster, std::vector<std::string> extra_args) {
  // Job accounts must reach their run directories under the agent's work dir.
  std::filesystem::permissions(cluster.dir(), std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                                  std::filesystem::perms::others_exec);
  cluster.mutable_options().agents[0].job_dirs = absl::StrCat(HETPOOL_SOURCE_DIR, ",", cluster.dir());
  std::vector<std::string> args = {"--run-as", "dynamic"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  cluster.mutable_options().agents[0].args = args;  // after the harness's own flags: these win
}

std::string LineAfter(const std::string& logs, const std::string& word) {
  const size_t at = logs.find(word);
  if (at == std::string::npos) return "";
  const size_t from = at + word.size();
  return std::string(absl::StripAsciiWhitespace(logs.substr(from, logs.find('\n', from) - from)));
}

// Two users' jobs on one node: different uids; neither reads the other's /proc/PID/environ nor
// its /tmp; what a job left in its /tmp is gone with it.
TEST(Confinement, TwoUsersJobsOnANodeSeeNeitherTheOthersEnvironmentNorItsTmp) {
  TestCluster cluster(OneNode());
  ConfineUsers(cluster, {});
  ASSERT_NO_FATAL_FAILURE(StartConfined(cluster));
  if (IsSkipped()) return;
  const std::string secret = absl::StrCat("alice-secret-", getpid());
  const std::string left_in_tmp = absl::StrCat("/tmp/hetpool-confinement-", getpid());
  pb::JobSpec alice_spec =
      cluster.ShellSpec(absl::StrCat("echo x > ", left_in_tmp, "; echo \"uid $(id -u)\"; exec sleep 600"));
  alice_spec.set_user("alice");
  (*alice_spec.mutable_env())["SECRET"] = secret;
  auto alice = cluster.Submit(alice_spec);
  ASSERT_TRUE(alice.ok()) << alice.status();
  ASSERT_TRUE(cluster.WaitForState(alice->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok()) << cluster.AgentLog(0);
  // Its file is written once it says its uid (the job is its one process, started directly).
  ASSERT_TRUE(Eventually(
      [&] {
        auto logs = cluster.Logs(alice->id());
        return logs.ok() && logs->find("uid ") != std::string::npos;
      },
      absl::Seconds(30)));

  // Bob's job looks for the secret in every process's environment (and, to show that the
  // search works, for a word of its own in its own), and for the file in /tmp.
  pb::JobSpec bob_spec = cluster.ShellSpec(absl::StrCat(
      "for f in /proc/[0-9]*/environ; do grep -qa ", secret,
      " $f 2>/dev/null && echo \"READ $f\"; done; grep -qa bob-word /proc/self/environ && ",
      "echo 'own environment read'; [ -e ", left_in_tmp, " ] && echo 'SEES the file'; ", "echo \"uid $(id -u)\""));
  bob_spec.set_user("bob");
  (*bob_spec.mutable_env())["BOB"] = "bob-word";
  auto bob = cluster.Submit(bob_spec);
  ASSERT_TRUE(bob.ok()) << bob.status();
  auto bob_done = cluster.WaitForState(bob->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(bob_done.ok()) << bob_done.status() << cluster.AgentLog(0);
  auto bob_logs = cluster.Logs(bob->id());
  auto alice_logs = cluster.Logs(alice->id());
  ASSERT_TRUE(bob_logs.ok() && alice_logs.ok());
  EXPECT_NE(bob_logs->find("own environment read"), std::string::npos) << *bob_logs;
  EXPECT_EQ(bob_logs->find("READ "), std::string::npos) << *bob_logs;
  EXPECT_EQ(bob_logs->find("SEES the file"), std::string::npos) << *bob_logs;
  const std::string alice_uid = LineAfter(*alice_logs, "uid "), bob_uid = LineAfter(*bob_logs, "uid ");
  ASSERT_FALSE(alice_uid.empty()) << *alice_logs;
  ASSERT_FALSE(bob_uid.empty()) << *bob_logs;
  EXPECT_NE(alice_uid, bob_uid);
  // Alice's file was in her own /tmp, never the host's, and goes with her job.
  EXPECT_FALSE(std::filesystem::exists(left_in_tmp));
  std::string out;
  ASSERT_EQ(cluster.RunCli({"cancel", alice->id()}, &out), 0) << out;
  ASSERT_TRUE(cluster.WaitForState(alice->id(), pb::JOB_STATE_CANCELLED, absl::Seconds(60)).ok());
  EXPECT_FALSE(std::filesystem::exists(left_in_tmp));
}

// Two users an operator maps to one account: the second user's job waits until no process of
// the first's lives, then runs.
TEST(Confinement, ASharedAccountIsNotHandedToAnotherUserWhileTheFirstsProcessesLive) {
  TestCluster cluster(OneNode());
  const std::string map = cluster.dir() + "/run-as.json";
  std::ofstream(map) << R"({"*": "nobody"})";
  ConfineUsers(cluster, {"--run-as-map", map});
  ASSERT_NO_FATAL_FAILURE(StartConfined(cluster));
  if (IsSkipped()) return;
  pb::JobSpec first_spec = cluster.ShellSpec("exec sleep 600");
  first_spec.set_user("carol");
  auto first = cluster.Submit(first_spec);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(cluster.WaitForState(first->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok()) << cluster.AgentLog(0);
  pb::JobSpec second_spec = cluster.ShellSpec("echo \"dave ran as $(id -un)\"");
  second_spec.set_user("dave");
  auto second = cluster.Submit(second_spec);
  ASSERT_TRUE(second.ok()) << second.status();
  // The agent holds it back and says why, in the job's events and `get`.
  const std::string why = absl::StrCat("its account nobody (uid 65534) still runs ", first->id(), " g1 of carol");
  auto waiting = cluster.WaitFor(
      second->id(), [&](const pb::Job& j) { return FindEvent(j, "NodeWaiting") != nullptr; }, absl::Seconds(60));
  ASSERT_TRUE(waiting.ok()) << waiting.status() << cluster.AgentLog(0);
  EXPECT_EQ(FindEvent(*waiting, "NodeWaiting")->message(), "node node-a holds the launch back: " + why);
  EXPECT_LT(waiting->state(), pb::JOB_STATE_RUNNING) << waiting->DebugString();
  std::string shown;
  EXPECT_EQ(cluster.RunCli({"get", second->id()}, &shown), 0) << shown;
  EXPECT_NE(shown.find("waiting:     on node-a: " + why), std::string::npos) << shown;
  std::string out;
  ASSERT_EQ(cluster.RunCli({"cancel", first->id()}, &out), 0) << out;
  auto done = cluster.WaitForState(second->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status() << cluster.AgentLog(0);
  auto logs = cluster.Logs(second->id());
  ASSERT_TRUE(logs.ok());
  EXPECT_NE(logs->find("dave ran as nobody"), std::string::npos) << *logs;
}

}  // namespace
}  // namespace hetpool::testing
