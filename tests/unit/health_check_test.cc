// The node's health check (issue 61, item 4): a program's exit and last line, bounded by a
// timeout, and the failure the agent reports while the last run failed. Spawns real programs.
#include "src/agent/health_check.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::agent {
namespace {

std::string Script(const testing::TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(HealthCheck, ANonZeroExitFailsWithTheProgramsLastLine) {
  testing::TempDir dir;
  const auto run =
      RunHealthCheck(Script(dir, "check", "echo checking; echo 'nvidia2: retired pages pending' >&2; echo; exit 1"),
                     absl::Seconds(30));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.last_line, "nvidia2: retired pages pending");
  const auto passed = RunHealthCheck(Script(dir, "ok", "echo all good"), absl::Seconds(30));
  EXPECT_EQ(passed.exit_code, 0);
  const auto slow = RunHealthCheck(Script(dir, "slow", "exec sleep 30"), absl::Milliseconds(300));
  EXPECT_EQ(slow.exit_code, -1);
  EXPECT_EQ(slow.last_line, "timed out after 300ms");
  const auto missing = RunHealthCheck(dir.path() + "/none", absl::Seconds(5));
  EXPECT_NE(missing.exit_code, 0);
}

TEST(HealthCheck, TheNodesFaultFollowsTheLastRunAtTheInterval) {
  testing::TempDir dir;
  const std::string verdict = dir.path() + "/verdict";
  std::ofstream(verdict) << "1";
  const std::string program = Script(dir, "check", "echo \"fan 3 stopped\"; exit $(cat " + verdict + ")");
  absl::Time now = absl::FromUnixSeconds(1000);
  HealthCheck check({.program = program, .interval = absl::Minutes(5), .timeout = absl::Seconds(30)},
                    [&] { return now; });
  EXPECT_EQ(check.Failure(), "");
  check.MaybeRun();
  ASSERT_TRUE(testing::Eventually([&] { return check.ran(); }, absl::Seconds(30)));
  EXPECT_EQ(check.Failure(), "health check " + program + " failed (exit 1): fan 3 stopped");
  std::ofstream(verdict) << "0";
  check.MaybeRun();  // not yet: the interval has not passed
  now += absl::Minutes(5);
  check.MaybeRun();
  ASSERT_TRUE(testing::Eventually([&] { return check.Failure().empty(); }, absl::Seconds(30)));
}

TEST(HealthCheck, ALineThatNamesCardsBlamesThemAndNotTheNode) {
  const std::vector<std::string> ids = {"nvidia0", "nvidia1", "nvidia2"};
  EXPECT_EQ(CardsNamedBy("nvidia2: retired pages pending", ids), std::vector<std::string>{"nvidia2"});
  EXPECT_EQ(CardsNamedBy("nvidia0,nvidia2: NVLink down", ids), (std::vector<std::string>{"nvidia0", "nvidia2"}));
  EXPECT_EQ(CardsNamedBy("nvidia0 nvidia1: hot", ids), (std::vector<std::string>{"nvidia0", "nvidia1"}));
  EXPECT_TRUE(CardsNamedBy("nvidia7: gone", ids).empty());             // not this node's card
  EXPECT_TRUE(CardsNamedBy("nvidia0, eth0: link down", ids).empty());  // also the node's network
  EXPECT_TRUE(CardsNamedBy("fan 3 stopped", ids).empty());
  EXPECT_TRUE(CardsNamedBy("disk: 3% free", ids).empty());

  testing::TempDir dir;
  const std::string program = Script(dir, "check", "echo 'nvidia1: row remapping failed'; exit 1");
  HealthCheck check({.program = program, .interval = absl::Minutes(5), .timeout = absl::Seconds(30)});
  check.MaybeRun();
  ASSERT_TRUE(testing::Eventually([&] { return check.ran(); }, absl::Seconds(30)));
  EXPECT_EQ(check.NodeFailure(ids), "");             // the cards are blamed, not the node
  EXPECT_NE(check.NodeFailure({"cambricon0"}), "");  // no such card here: the node's fault
  std::vector<DeviceRecord> devices(3);
  for (size_t i = 0; i < devices.size(); ++i) devices[i].id = ids[i];
  check.BlameNamedCards(devices);
  EXPECT_TRUE(devices[0].healthy && devices[0].signals.empty());
  ASSERT_EQ(devices[1].signals.size(), 1u);
  EXPECT_EQ(devices[1].signals[0].severity, Severity::kFatal);
  EXPECT_EQ(devices[1].signals[0].source, "health-check");
  EXPECT_EQ(devices[1].signals[0].what, program + ": nvidia1: row remapping failed");
  EXPECT_FALSE(devices[1].healthy);
}

// Pre-flight (--preflight): a launch waits for a run that began after it asked; a pass is kept
// for the job's later generations; a failure naming other cards than the job's lets it start.
TEST(HealthCheck, APreflightWaitsForARunThatBeganAfterTheJobAsked) {
  using State = PreflightVerdict::State;
  testing::TempDir dir;
  const std::string verdict = dir.path() + "/verdict";
  const std::string line = dir.path() + "/line";
  std::ofstream(verdict) << "0";
  std::ofstream(line) << "all good";
  const std::string program = Script(dir, "check", "cat " + line + "; echo; exit $(cat " + verdict + ")");
  const std::vector<std::string> node = {"nvidia0", "nvidia1"};
  HealthCheck off({.program = program});
  EXPECT_EQ(off.Preflight("job-1", {"nvidia0"}, node).state, State::kNotAsked);

  HealthCheck check(
      {.program = program, .interval = absl::Minutes(5), .timeout = absl::Seconds(30), .preflight = true});
  EXPECT_EQ(check.Preflight("job-1", {"nvidia0"}, node).state, State::kRunning);
  PreflightVerdict v;
  ASSERT_TRUE(testing::Eventually(
      [&] { return (v = check.Preflight("job-1", {"nvidia0"}, node)).state != State::kRunning; }, absl::Seconds(30)));
  EXPECT_EQ(v.state, State::kPassed);
  EXPECT_TRUE(absl::StartsWith(v.words, "pre-flight health check passed in ")) << v.words;
  EXPECT_EQ(check.Preflight("job-1", {"nvidia0"}, node).state, State::kPassed);  // a later generation: no run
  EXPECT_EQ(check.Preflight("job-1", {"nvidia0"}, node).words, "");

  // A failing run naming nvidia1: a job on nvidia1 is refused, one on nvidia0 starts.
  std::ofstream(verdict) << "1";
  std::ofstream(line) << "nvidia1: row remapping failed";
  EXPECT_EQ(check.Preflight("job-2", {"nvidia1"}, node).state, State::kRunning);
  ASSERT_TRUE(testing::Eventually(
      [&] { return (v = check.Preflight("job-2", {"nvidia1"}, node)).state != State::kRunning; }, absl::Seconds(30)));
  EXPECT_EQ(v.state, State::kFailed);
  EXPECT_EQ(v.words, "pre-flight health check " + program + " failed (exit 1): nvidia1: row remapping failed");
  EXPECT_TRUE(check.TakeVerdictChanged());
  EXPECT_FALSE(check.TakeVerdictChanged());
  // job-3 asked after that run began: it waits for one of its own.
  EXPECT_EQ(check.Preflight("job-3", {"nvidia0"}, node).state, State::kRunning);
  ASSERT_TRUE(testing::Eventually(
      [&] { return (v = check.Preflight("job-3", {"nvidia0"}, node)).state != State::kRunning; }, absl::Seconds(30)));
  EXPECT_EQ(v.state, State::kPassed);
  EXPECT_TRUE(absl::StrContains(v.words, "for its cards (health check")) << v.words;

  // A failure about the node refuses every job.
  std::ofstream(line) << "fan 3 stopped";
  EXPECT_EQ(check.Preflight("job-4", {"nvidia0"}, node).state, State::kRunning);
  ASSERT_TRUE(testing::Eventually(
      [&] { return (v = check.Preflight("job-4", {"nvidia0"}, node)).state != State::kRunning; }, absl::Seconds(30)));
  EXPECT_EQ(v.state, State::kFailed);
  EXPECT_TRUE(absl::EndsWith(v.words, "fan 3 stopped")) << v.words;
  EXPECT_NE(check.NodeFailure(node), "");  // and takes the node out of service, as a periodic run would
}

}  // namespace
}  // namespace hetpool::agent
