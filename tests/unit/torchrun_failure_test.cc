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
  const std::vector<std::string> expected = {"rank 1 says hello",
                                             "about to fail",
                                             "Traceback (most recent call last):",
                                             "  File \"/tmp/tr/fail.py\", line 6, in <module>",
                                             "    raise ValueError(\"bad batch size 0\")",
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
  const std::string log =
      "[default0]:" + chinese +
      "\n[default0]:bad \xFF byte\n"
      "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-01_13:08:47\n  host      : node-b\n"
      "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 7)\n  error_file: <N/A>\n  traceback : To enable "
      "traceback\n";
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

// PyTorch 2.x (issue 47, item 1): torchrun logs in glog form and prints its ChildFailedError
// traceback and a banner, listing the other ranks' SIGTERM (-15) under "Failures", before the
// Root Cause report. Before, the reason quoted the banner ("----...") and the last lines were
// torchrun's traceback. The shape of what torchrun 2.11 printed on an H200.
std::string Torch2Failure(const std::string& before, const std::string& exitcode, int rank,
                          const std::string& traceback) {
  const std::string glog = "E1204 17:52:44.488000 549 torch/distributed/elastic/multiprocessing/api.py:986] ";
  return "W1204 17:52:43.861000 549 torch/distributed/run.py:851] \n"
         "W1204 17:52:43.861000 549 torch/distributed/run.py:851] *****************************************\n"
         "W1204 17:52:43.861000 549 torch/distributed/run.py:851] Setting OMP_NUM_THREADS environment variable for "
         "each process to be 1 in default\n"
         "W1204 17:52:43.861000 549 torch/distributed/run.py:851] *****************************************\n" +
         before +
         "W1204 17:52:44.388000 549 torch/distributed/elastic/multiprocessing/api.py:1012] Sending process 572 closing "
         "signal SIGTERM\n" +
         glog + "failed (exitcode: " + exitcode + ") local_rank: " + std::to_string(rank) +
         " (pid: 573) of binary: /opt/torch/.venv/bin/python\n"
         "Traceback (most recent call last):\n"
         "  File \"/opt/torch/.venv/bin/torchrun\", line 10, in <module>\n"
         "    sys.exit(main())\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\n"
         "train.py FAILED\n"
         "------------------------------------------------------------\n"
         "Failures:\n[1]:\n  time      : 2026-12-04_17:52:44\n  host      : localhost\n"
         "  rank      : 0 (local_rank: 0)\n  exitcode  : -15 (pid: 572)\n  error_file: <N/A>\n"
         "  traceback : Signal 15 (SIGTERM) received by PID 572\n"
         "------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-04_17:52:44\n  host      : localhost\n"
         "  rank      : " +
         std::to_string(rank) + " (local_rank: " + std::to_string(rank) +
         ")\n"
         "  exitcode  : " +
         exitcode + " (pid: 573)\n  error_file: <N/A>\n  traceback : " + traceback +
         "\n"
         "============================================================\n";
}

TEST(TorchrunFailure, PyTorch2sFailuresNameTheRankItsExitAndItsOwnLastLine) {
  const struct {
    std::string name, before, exitcode;
    int rank, exit_code;
    std::string signal, last_line;
  } cases[] = {
      {"a Python exception",
       "Traceback (most recent call last):\n  File \"/work/fail_exc.py\", line 14, in <module>\n"
       "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (planted)\n"
       "[default0]:rank 0 step 1 loss 2.0\n[default1]:rank 1 step 1 loss 2.0\n",
       "1", 1, 1, "", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (planted)"},
      {"an exit code and a line on stderr",
       "rank 1: giving up with code 3\n[default0]:rank 0 step 1 loss 2.0\n[default1]:rank 1 step 1 loss 2.0\n", "3", 1,
       3, "", "rank 1: giving up with code 3"},
      {"SIGSEGV", "[default1]:rank 1 step 1 loss 2.0\n[default0]:rank 0 step 1 loss 2.0\n", "-11", 1, 0, "SIGSEGV",
       "rank 1 step 1 loss 2.0"},
      {"a CUDA binary with no kernel image",
       "[default0]:kernel did not run: no kernel image is available for execution on the device\n", "1", 0, 1, "",
       "kernel did not run: no kernel image is available for execution on the device"},
  };
  for (const auto& c : cases) {
    const auto failure = ParseTorchrunFailure(Torch2Failure(c.before, c.exitcode, c.rank, "<N/A>"));
    ASSERT_TRUE(failure.has_value()) << c.name;
    EXPECT_EQ(failure->global_rank, c.rank) << c.name;
    EXPECT_EQ(failure->exit_code, c.exit_code) << c.name;
    EXPECT_EQ(failure->signal, c.signal) << c.name;
    ASSERT_FALSE(failure->last_lines.empty()) << c.name;
    EXPECT_EQ(failure->last_lines.back(), c.last_line) << c.name;
    for (const auto& line : failure->last_lines) {
      EXPECT_EQ(line.find("ChildFailedError"), std::string::npos) << c.name << ": " << line;
      EXPECT_EQ(line.find("====="), std::string::npos) << c.name << ": " << line;
      EXPECT_EQ(line.find("-----"), std::string::npos) << c.name << ": " << line;
      EXPECT_EQ(line.find("torch/distributed"), std::string::npos) << c.name << ": " << line;
    }
  }
}

// The same four failures as torchrun 2.11 printed them on the H200 (../shared/fixtures, not in
// the repository: skipped without it).
TEST(TorchrunFailure, TheH200sTorchrun211FixturesReadRight) {
  const std::string dir = std::string(HETPOOL_SOURCE_DIR_FOR_TESTS) + "/../shared/fixtures/torchrun-2.11";
  if (!std::ifstream(dir + "/README.md")) GTEST_SKIP() << "the torchrun 2.11 fixtures are expected in " << dir;
  const struct {
    std::string file;
    int rank, exit_code;
    std::string signal, last_line;
  } cases[] = {
      {"fail_exc.log", 1, 1, "", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (planted)"},
      {"fail_exit.log", 1, 3, "", "rank 1: giving up with code 3"},
      {"fail_sig.log", 1, 0, "SIGSEGV", ""},
      {"k_sm80.log", 0, 1, "", "kernel did not run: no kernel image is available for execution on the device"},
  };
  for (const auto& c : cases) {
    std::ifstream in(dir + "/" + c.file);
    std::stringstream text;
    text << in.rdbuf();
    const auto failure = ParseTorchrunFailure(text.str());
    ASSERT_TRUE(failure.has_value()) << c.file;
    EXPECT_EQ(failure->global_rank, c.rank) << c.file;
    EXPECT_EQ(failure->exit_code, c.exit_code) << c.file;
    EXPECT_EQ(failure->signal, c.signal) << c.file;
    if (!c.last_line.empty()) {
      ASSERT_FALSE(failure->last_lines.empty()) << c.file;
      EXPECT_EQ(failure->last_lines.back(), c.last_line) << c.file;
    }
    for (const auto& line : failure->last_lines) {
      EXPECT_EQ(line.find("ChildFailedError"), std::string::npos) << c.file << ": " << line;
      EXPECT_EQ(line.find("-----"), std::string::npos) << c.file << ": " << line;
    }
  }
}

// A rank whose last line has no newline: torchrun's failure line follows on the same line, in
// either form. The rank's part is its last line; torchrun's traceback is not.
TEST(TorchrunFailure, ARanksUnterminatedLastLineIsItsOwnAndTheReportStillStartsThere) {
  const std::string root =
      "Traceback (most recent call last):\n  File \"/usr/bin/torchrun\", line 33, in <module>\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n=====\n/bin/sh FAILED\n-----\n"
      "Root Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 3 (pid: 7)\n=====\n";
  for (const std::string& torchrun :
       {std::string("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 3) local_rank: 0 (pid: 7)"),
        std::string("E1204 17:52:44.488000 549 torch/distributed/elastic/multiprocessing/api.py:986] failed "
                    "(exitcode: 3) local_rank: 0 (pid: 7)")}) {
    const auto failure = ParseTorchrunFailure("[default0]:step 1\n[default0]:no newline" + torchrun + "\n" + root);
    ASSERT_TRUE(failure.has_value()) << torchrun;
    EXPECT_EQ(failure->exit_code, 3);
    EXPECT_EQ(failure->last_lines, (std::vector<std::string>{"step 1", "no newline"})) << torchrun;
  }
}

// Before its report (a torchrun at its exit barrier prints it minutes later): the first worker
// failure it logged, in either form, with that rank's own labelled lines; a user's line that
// merely says "failed (exitcode: ...)" is not torchrun's.
TEST(TorchrunFailure, TheFirstWorkerFailureIsReadBeforeTheReport) {
  const std::string lines =
      "[default1]:loading shard 7\n[default0]:rank 0: the dataset index is corrupt\n"
      "[default0]:failed (exitcode: 9) local_rank: 1 (pid: 1)\n";
  for (const std::string& torchrun :
       {std::string("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 3) local_rank: 0 (pid: 7) "
                    "of binary: /usr/bin/python3.11"),
        std::string("E1204 17:52:44.488000 549 torch/distributed/elastic/multiprocessing/api.py:986] failed "
                    "(exitcode: -11) local_rank: 0 (pid: 7) of binary: /opt/torch/.venv/bin/python")}) {
    const auto failure = ParseFirstWorkerFailure(
        lines + torchrun + "\nE1204 later: failed (exitcode: 1) local_rank: 1 (pid: 8)\n", {4, 5});
    ASSERT_TRUE(failure.has_value()) << torchrun;
    EXPECT_EQ(failure->local_rank, 0);
    EXPECT_EQ(failure->global_rank, 4);
    EXPECT_EQ(failure->last_lines.back(), "failed (exitcode: 9) local_rank: 1 (pid: 1)") << torchrun;
    EXPECT_EQ(failure->last_lines.size(), 2u);
  }
  EXPECT_EQ(ParseFirstWorkerFailure(lines, {}), std::nullopt);
  const auto unknown = ParseFirstWorkerFailure(
      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) local_rank: 1 (pid: 7)\n", {});
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->global_rank, -1);
  EXPECT_EQ(unknown->signal, "SIGSEGV");
}

TEST(TorchrunFailure, WithoutTorchrunsReportNothingIsMadeUp) {
  EXPECT_FALSE(ParseTorchrunFailure("").has_value());
  EXPECT_FALSE(ParseTorchrunFailure("Traceback (most recent call last):\nKeyboardInterrupt\n").has_value());
  EXPECT_FALSE(ParseTorchrunFailure("Root Cause (first observed failure):\n[0]:\n  time : now\n").has_value());
}

}  // namespace
}  // namespace hetpool::agent

namespace hetpool::agent {
namespace {

// Started without torchrun, a process's failure is its own exit and its last lines.
TEST(TorchrunFailure, ADirectProcesssFailureIsItsOwnExitAndLastLines) {
  std::string log;
  for (int i = 0; i < 15; ++i) log += "line " + std::to_string(i) + "\n";
  log += "Traceback (most recent call last):\nValueError: bad\n\n";
  const TorchrunFailure failure = DirectFailure(log, 0, 3, 0);
  EXPECT_EQ(failure.global_rank, 0);
  EXPECT_EQ(failure.local_rank, 0);
  EXPECT_EQ(failure.exit_code, 3);
  EXPECT_EQ(failure.signal, "");
  ASSERT_EQ(failure.last_lines.size(), kMaxLastLines);
  EXPECT_EQ(failure.last_lines.back(), "ValueError: bad");
  const TorchrunFailure killed = DirectFailure("", 0, 139, 11);
  EXPECT_EQ(killed.signal, "SIGSEGV");
  EXPECT_EQ(killed.exit_code, 0);
  EXPECT_TRUE(killed.last_lines.empty());
}

}  // namespace
}  // namespace hetpool::agent
