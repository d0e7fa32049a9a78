// Whose a process on a card is (issue 47, item 2): by the job's cgroup, its process group, then
// its account; a card is dirty while a process of no running job, or of a job not given that
// card, holds it.
#include "src/agent/card_holders.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <map>

#include "gtest/gtest.h"

namespace hetpool::agent {
namespace {

// /proc as the test describes it: pid -> facts (absent: not visible).
ProcessReader FakeProc(std::map<int, ProcessFacts> processes) {
  return [processes = std::move(processes)](int pid) {
    auto it = processes.find(pid);
    return it == processes.end() ? ProcessFacts{} : it->second;
  };
}

DeviceRecord Card(const std::string& id, std::vector<CardProcess> processes) {
  DeviceRecord d;
  d.id = id;
  d.processes = std::move(processes);
  return d;
}

const std::vector<JobOwnership> kRunning = {
    {"job-000001 g1", 100, {150}, 61184, {"nvidia0"}},
    {"job-000002 g1", 200, {}, 61185, {"nvidia1"}},
};

TEST(CardHolders, ARunningJobsOwnProcessesLeaveItsCardClean) {
  std::vector<DeviceRecord> cards = {Card("nvidia0", {{101, 1000, ""}, {150, 500, ""}, {170, 10, ""}})};
  AttributeCardProcesses(cards, kRunning,
                         FakeProc({{101, {true, 61184, 100, "python3"}},     // in torchrun's group
                                   {150, {true, 0, 150, "helper"}},          // in the job's cgroup
                                   {170, {true, 61184, 170, "escaped"}}}));  // left the group: its account
  EXPECT_EQ(cards[0].dirty, "");
  for (const auto& p : cards[0].processes) EXPECT_EQ(p.owner, "job-000001 g1") << p.pid;
}

TEST(CardHolders, AProcessOfNoJobMakesTheCardDirtyAndIsNamed) {
  std::vector<DeviceRecord> cards = {Card("nvidia0", {{4242, 2658, ""}}), Card("nvidia1", {{4343, 0, ""}})};
  AttributeCardProcesses(cards, kRunning, FakeProc({{4242, {true, 0, 4242, "python3"}}}));
  EXPECT_EQ(cards[0].dirty, "pid 4242 (uid 0, python3) holds 2658 MiB");
  EXPECT_EQ(cards[0].processes[0].owner, "");
  EXPECT_FALSE(cards[0].Placeable());
  // A pid the agent cannot see (another pid namespace) is nobody's it knows of.
  EXPECT_EQ(cards[1].dirty, "pid 4343 (not visible to the agent) holds it");
}

TEST(CardHolders, AJobOnACardItWasNotGivenMakesThatCardDirty) {
  std::vector<DeviceRecord> cards = {Card("nvidia1", {{101, 700, ""}, {201, 300, ""}})};
  AttributeCardProcesses(cards, kRunning,
                         FakeProc({{101, {true, 61184, 100, "python3"}}, {201, {true, 61185, 200, "python3"}}}));
  EXPECT_EQ(cards[0].processes[0].owner, "job-000001 g1");
  EXPECT_EQ(cards[0].processes[1].owner, "job-000002 g1");
  EXPECT_EQ(cards[0].dirty,
            "pid 101 (uid 61184, python3) holds 700 MiB for job-000001 g1, which was not given this card");
}

TEST(CardHolders, AnAccountWithJobsOnSeveralCardsOwnsItsProcessByTheCard) {
  const std::vector<JobOwnership> same_user = {{"job-000003 g1", 300, {}, 61186, {"nvidia0"}},
                                               {"job-000004 g1", 400, {}, 61186, {"nvidia1"}}};
  std::vector<DeviceRecord> cards = {Card("nvidia1", {{555, 100, ""}})};
  AttributeCardProcesses(cards, same_user, FakeProc({{555, {true, 61186, 555, "worker"}}}));
  EXPECT_EQ(cards[0].processes[0].owner, "job-000004 g1");
  EXPECT_EQ(cards[0].dirty, "");
}

TEST(CardHolders, RootJobsOwnNothingByAccountAndAFewStrangersAreNamed) {
  // A job running as root (or as the agent) has no account of its own: a root process that left
  // its group is nobody's.
  const std::vector<JobOwnership> root_job = {{"job-000005 g1", 500, {}, std::nullopt, {"nvidia0"}}};
  std::vector<CardProcess> many;
  std::map<int, ProcessFacts> proc;
  for (int pid = 600; pid < 607; ++pid) {
    many.push_back({pid, 1, ""});
    proc[pid] = {true, 0, pid, "x"};
  }
  std::vector<DeviceRecord> cards = {Card("nvidia0", many)};
  AttributeCardProcesses(cards, root_job, FakeProc(proc));
  EXPECT_EQ(cards[0].dirty,
            "pid 600 (uid 0, x) holds 1 MiB; pid 601 (uid 0, x) holds 1 MiB; pid 602 (uid 0, x) holds 1 MiB; "
            "pid 603 (uid 0, x) holds 1 MiB and 3 more");
}

TEST(CardHolders, ReadsTheUidGroupAndCommandOfARealProcess) {
  const ProcessFacts self = ReadProcessFacts(getpid());
  EXPECT_TRUE(self.visible);
  EXPECT_EQ(self.uid, geteuid());
  EXPECT_EQ(self.group, getpgrp());
  EXPECT_FALSE(self.command.empty());
  EXPECT_FALSE(ReadProcessFacts(0x7ffffff0).visible);
}

// A real child: killed when it is still the process described, left alone when /proc says
// another process now has its pid (a reused pid), and nothing is killed for a pid that is gone.
TEST(CardHolders, KillsOnlyTheProcessItWasToldOf) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  const ProcessFacts facts = ReadProcessFacts(child);
  ASSERT_TRUE(facts.visible);
  ProcessFacts other = facts;
  other.command = "someone-else";
  EXPECT_FALSE(KillIfStill(child, facts, FakeProc({{child, other}})));
  EXPECT_EQ(waitpid(child, nullptr, WNOHANG), 0) << "a reused pid was killed";
  EXPECT_TRUE(KillIfStill(child, facts));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(KillIfStill(child, facts)) << "reaped: nothing to kill";
}

}  // namespace
}  // namespace hetpool::agent
