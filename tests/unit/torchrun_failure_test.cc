// Reading which rank failed from what torchrun printed (real torch 1.13 output, tests/fakes/fixtures/torchrun).
#include "src/agent/torchrun_failure.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool::agent {
namespace {

namespace pb = ::hetpool::v1;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(HETPOOL_FIXTURE_DIR) + "/torchrun/" + name);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(TorchrunFailure, AnExceptionNamesItsRankAndKeepsItsTraceback) {
  const auto failure = ParseTorchrunFailure(Fixture("exception-on-rank1.txt"));
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->global_rank, 1);
  EXPECT_EQ(failure->local_rank, 1);
  EXPECT_EQ(failure->exit_code, 1);
  EXPECT_EQ(failure->signal, "");
  // Its own prefixed stdout, then the node's stderr (unprefixed); not rank 0's, not torchrun's.
  const std::vector<std::string> expected = {
      "rank 1 says hello", "about to fail", "Traceback (most recent call last):",
      "  File \"/tmp/tr/fail.py\", line 6, in <module>", "    raise ValueError(\"bad batch size 0\")",
      "ValueError: bad batch size 0"};
  EXPECT_EQ(failure->last_lines, expected);
}

TEST(TorchrunFailure, TheRootCauseIsTheFirstFailureNotTheLast) {
  // Rank 0 called sys.exit(3); rank 1 then died of SIGSEGV (listed under "Failures").
  const auto failure = ParseTorchrunFailure(Fixture("exit3-and-sigsegv.txt"));
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->global_rank, 0);
  EXPECT_EQ(failure->exit_code, 3);
  EXPECT_EQ(failure->signal, "");
  EXPECT_EQ(failure->last_lines, std::vector<std::string>{"step 10 loss 0.5 on rank 0"});
}

TEST(TorchrunFailure, ASignalIsNamedAndLongOutputIsCut) {
  std::string log;
  for (int i = 0; i < 30; ++i) log += "[default0]:line " + std::to_string(i) + " " + std::string(400, 'x') + "\n";
  log +=
      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 7) of binary: "
      "/usr/bin/python3\n"
      "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-01_13:08:47\n  host      : node-b\n"
      "  rank      : 6 (local_rank: 0)\n  exitcode  : -9 (pid: 7)\n  error_file: <N/A>\n"
      "  traceback : Signal 9 (SIGKILL) received by PID 7\n";
  const auto failure = ParseTorchrunFailure(log);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->global_rank, 6);
  EXPECT_EQ(failure->exit_code, 0);
  EXPECT_EQ(failure->signal, "SIGKILL");
  ASSERT_EQ(failure->last_lines.size(), kMaxLastLines);
  EXPECT_EQ(failure->last_lines.back().size(), kMaxLineBytes);
  EXPECT_EQ(failure->last_lines.back().substr(0, 8), "line 29 ");
}

// A rank's output is the job's: any bytes, any language. The report keeps valid UTF-8, cut
// between characters.
TEST(TorchrunFailure, LastLinesAreValidUtf8CutBetweenCharacters) {
  std::string chinese;
  while (chinese.size() < 2 * kMaxLineBytes) chinese += "\xE6\x8D\x9F\xE5\xA4\xB1";  // "loss", 3 bytes each
  const std::string log = "[default0]:" + chinese + "\n[default0]:bad \xFF byte\n"
      "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-01_13:08:47\n  host      : node-b\n"
      "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 7)\n  error_file: <N/A>\n  traceback : To enable traceback\n";
  const auto failure = ParseTorchrunFailure(log);
  ASSERT_TRUE(failure.has_value());
  ASSERT_EQ(failure->last_lines.size(), 2u);
  EXPECT_EQ(failure->last_lines[0], chinese.substr(0, kMaxLineBytes));  // 300 = 100 whole characters
  EXPECT_EQ(failure->last_lines[1], "bad \xEF\xBF\xBD byte");
  pb::RankFailure proto;
  for (const auto& line : failure->last_lines) proto.add_last_lines(line);
  pb::RankFailure parsed;
  EXPECT_TRUE(parsed.ParseFromString(proto.SerializeAsString()));
}

TEST(TorchrunFailure, WithoutTorchrunsReportNothingIsMadeUp) {
  EXPECT_FALSE(ParseTorchrunFailure("").has_value());
  EXPECT_FALSE(ParseTorchrunFailure("Traceback (most recent call last):\nKeyboardInterrupt\n").has_value());
  EXPECT_FALSE(ParseTorchrunFailure("Root Cause (first observed failure):\n[0]:\n  time : now\n").has_value());
}

}  // namespace
}  // namespace hetpool::agent
