// The daemon's log store and log filter: what a reader can name, what a job's output costs in
// disk and memory (issue 14, items 1 and 5).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "src/daemon/logs/log_filter.h"
#include "src/common/torchrun_lines.h"
#include "src/daemon/logs/log_request.h"
#include "src/daemon/logs/log_store.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::daemon {
namespace {

std::string ReadAll(const LogStore& store, const std::string& job, uint64_t generation, const std::string& node,
                    uint64_t* dropped = nullptr) {
  std::string out;
  uint64_t offset = 0;
  while (true) {
    auto slice = store.Read(job, generation, node, offset, 7);
    EXPECT_TRUE(slice.ok()) << slice.status();
    if (!slice.ok() || (slice->data.empty() && slice->dropped == 0)) break;
    if (dropped != nullptr) *dropped += slice->dropped;
    offset += slice->dropped + slice->data.size();
    out += slice->data;
  }
  return out;
}

TEST(LogStore, AppendsAtOffsetsAndReadsBack) {
  testing::TempDir dir;
  auto store = LogStore::Open(dir.path() + "/logs");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->Append("job-000001", 1, "node-a", 0, "hello "), 6u);
  EXPECT_EQ(*(*store)->Append("job-000001", 1, "node-a", 3, "lo world"), 11u);  // overlap: only the new bytes
  EXPECT_EQ(*(*store)->Append("job-000001", 1, "node-a", 20, "gap"), 11u);      // a gap writes nothing
  EXPECT_EQ(ReadAll(**store, "job-000001", 1, "node-a"), "hello world");
  EXPECT_EQ(ReadAll(**store, "job-000001", 2, "node-a"), "");  // no such stream: empty, not an error
}

TEST(LogStore, RefusesNamesThatClimbOutOfTheRoot) {
  testing::TempDir dir;
  std::ofstream(dir.path() + "/secret") << "the CA key";
  auto store = LogStore::Open(dir.path() + "/logs");
  ASSERT_TRUE(store.ok());
  for (const std::string& node :
       std::vector<std::string>{"../../secret", "..", ".", "a/b", "", ".hidden", std::string("a\0b", 3)}) {
    auto read = (*store)->Read("job-000001", 1, node, 0, 1024);
    EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << "node '" << node << "': " << read.status();
    auto write = (*store)->Append("job-000001", 1, node, 0, "x");
    EXPECT_TRUE(absl::IsInvalidArgument(write.status())) << "node '" << node << "'";
  }
  for (const std::string& job : std::vector<std::string>{"..", "../logs", "job/1"}) {
    EXPECT_TRUE(absl::IsInvalidArgument((*store)->Read(job, 1, "node-a", 0, 1024).status())) << job;
  }
}

TEST(LogStore, NeverFollowsALinkPlantedInTheTree) {
  testing::TempDir dir;
  const std::string secret = dir.path() + "/secret";
  std::ofstream(secret) << "the CA key";
  auto store = LogStore::Open(dir.path() + "/logs");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Append("job-000001", 1, "node-a", 0, "mine").ok());
  // A link where a node's directory would be, and one in place of a segment.
  ASSERT_EQ(symlink(dir.path().c_str(), (dir.path() + "/logs/job-000001/g1/node-b").c_str()), 0);
  EXPECT_FALSE((*store)->Read("job-000001", 1, "node-b", 0, 1024).ok());
  const std::string segment = dir.path() + "/logs/job-000001/g1/node-a/00000000000000000000.log";
  ASSERT_TRUE(std::filesystem::remove(segment));
  ASSERT_EQ(symlink(secret.c_str(), segment.c_str()), 0);
  EXPECT_EQ(ReadAll(**store, "job-000001", 1, "node-a"), "");  // a link is not a segment
  EXPECT_FALSE(absl::StrContains(ReadAll(**store, "job-000001", 1, "node-a"), "CA key"));
}

TEST(LogStore, KeepsFilesPrivate) {
  testing::TempDir dir;
  auto store = LogStore::Open(dir.path() + "/logs");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Append("job-000001", 1, "node-a", 0, "env dump").ok());
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/logs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir.path() + "/logs/job-000001/g1/node-a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir.path() + "/logs/job-000001/g1/node-a/00000000000000000000.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(LogStore, CapRotatesTheOldestBytesAwayAndKeepsOffsets) {
  testing::TempDir dir;
  auto store = LogStore::Open(dir.path() + "/logs", LogStoreOptions{.max_stream_bytes = 40});
  ASSERT_TRUE(store.ok());
  std::string all;
  uint64_t end = 0;
  for (int i = 0; i < 30; ++i) {
    const std::string piece = "line " + std::to_string(i) + "\n";
    auto next = (*store)->Append("job-000001", 1, "node-a", end, piece);
    ASSERT_TRUE(next.ok()) << next.status();
    end = *next;
    all += piece;
  }
  EXPECT_EQ(end, all.size());  // offsets keep counting every byte ever pushed
  uint64_t held = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/logs/job-000001/g1/node-a")) {
    held += entry.file_size();
  }
  EXPECT_LE(held, 40u);
  uint64_t dropped = 0;
  const std::string kept = ReadAll(**store, "job-000001", 1, "node-a", &dropped);
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(dropped + kept.size(), all.size());
  EXPECT_EQ(kept, all.substr(dropped));  // the newest bytes, whole
  // A resend of bytes already rotated away changes nothing.
  EXPECT_EQ(*(*store)->Append("job-000001", 1, "node-a", 0, all), all.size());
}

TEST(LogFilter, PassesEverythingWithoutARank) {
  LogFilter filter(std::nullopt);
  EXPECT_EQ(filter.Feed("a\nb"), "a\nb");
  EXPECT_EQ(filter.Feed("c\n"), "c\n");
}

TEST(LogFilter, KeepsOneRanksLinesAcrossChunkBoundaries) {
  LogFilter filter(1);
  std::string out;
  const std::string log = "[default0]:zero\n[default1]:one\n[def";
  for (char c : log) out += filter.Feed(std::string(1, c));
  out += filter.Feed("ault1]:two\n[default10]:ten\nplain\n[default1]:three");
  EXPECT_EQ(out, "[default1]:one\n[default1]:two\n[default1]:three");
}

// A process started without torchrun writes untagged lines: every one is its rank's, labelled
// so, and kept for a reader of rank 0, even one that looks like torchrun's own.
TEST(LogFilter, ADirectProcesssLinesAreAllItsRanks) {
  LogFilter labelled(std::nullopt, kMaxLogLine, LogLabels{"node-a", {0}}, /*direct=*/true);
  EXPECT_EQ(labelled.Feed("step 1\nWARNING:torch.distributed.run:mine\npart"),
            "[node-a r0] step 1\n[node-a r0] WARNING:torch.distributed.run:mine\n");
  EXPECT_EQ(labelled.Finish(), "[node-a r0] part");  // an unfinished last line, at the end
  LogFilter rank0(0, kMaxLogLine, std::nullopt, /*direct=*/true);
  EXPECT_EQ(rank0.Feed("a\nb\n"), "a\nb\n");
}

TEST(LogFilter, SplitsLongLinesAndMarksTheRest) {
  LogFilter filter(std::nullopt, /*max_line=*/100);
  const std::string out = filter.Feed(std::string(250, 'x') + "\nshort\n");
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(out, '\n')) lines.emplace_back(line);
  // 100 + 74 + 74 + 2: each continuation spends 26 of its 100 bytes on the mark.
  ASSERT_EQ(lines.size(), 6u) << out;
  EXPECT_EQ(lines[0], std::string(100, 'x'));
  for (size_t i = 1; i <= 3; ++i) {
    EXPECT_TRUE(absl::StartsWith(lines[i], LogFilter::kContinued)) << lines[i];
    EXPECT_LE(lines[i].size(), 100u);
  }
  EXPECT_EQ(lines[4], "short");
  size_t xs = 0;
  for (char c : out) xs += c == 'x';
  EXPECT_EQ(xs, 250u);  // nothing lost, only split
}

TEST(LogFilter, OutputOfAHugeLineIsBoundedPerFeed) {
  // 200 MB without a newline, fed in 64 KiB reads as the daemon does: each Feed returns about
  // what it was given, so nothing accumulates.
  LogFilter filter(0);
  EXPECT_EQ(filter.Feed("[default0]:"), "[default0]:");
  const std::string chunk(64 * 1024, 'y');
  size_t out = 0;
  for (int i = 0; i < 3200; ++i) {
    const std::string piece = filter.Feed(chunk);
    ASSERT_LE(piece.size(), chunk.size() + 200u);
    out += piece.size();
  }
  EXPECT_GT(out, 3200u * chunk.size());
}

}  // namespace
}  // namespace hetpool::daemon

namespace hetpool::daemon {
namespace {

// `rank` is a proto3 optional: rank 0 set is rank 0, not "every rank" (a trap for raw clients
// when presence was a separate has_rank flag).
TEST(LogStreamsFor, RankZeroIsARankAndNoRankIsEveryRank) {
  hetpool::v1::Job job;
  job.mutable_spec()->set_nnodes(2);
  job.mutable_spec()->set_procs_per_node(2);
  auto* a = job.add_placement();
  a->set_node("node-a");
  a->add_global_ranks(2);
  a->add_global_ranks(3);
  auto* b = job.add_placement();
  b->set_node("node-b");
  b->add_global_ranks(0);
  b->add_global_ranks(1);
  hetpool::v1::GetJobLogsRequest every;
  auto all = LogStreamsFor(job, every, 0);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 2u);
  hetpool::v1::GetJobLogsRequest rank0;
  rank0.set_rank(0);
  auto one = LogStreamsFor(job, rank0, 0);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].node, "node-b");
  EXPECT_EQ((*one)[0].local_rank, 0);
  rank0.set_rank(4);
  EXPECT_TRUE(absl::IsInvalidArgument(LogStreamsFor(job, rank0, 0).status()));
}

}  // namespace
}  // namespace hetpool::daemon

namespace hetpool::daemon {
namespace {

// Labelled (the default for readers): where each line came from, torchrun's chatter left out,
// decided the same however the bytes are cut into chunks.
TEST(LogFilter, LabelsLinesWithNodeAndGlobalRankAndLeavesOutTorchrunsChatter) {
  const std::string log =
      "WARNING:torch.distributed.run:\n"
      "*****************************************\n"
      "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, ...\n"
      "*****************************************\n"
      "[default0]:step 1 loss 0.5\n"
      "Traceback (most recent call last):\n"
      "[default1]:step 1 loss 0.6\n"
      "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'x' has failed to shutdown the "
      "rendezvous 'job-1' due to an error of type RendezvousConnectionError.\n"
      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)\n"
      "no newline at the end";
  const std::string expected =
      "[node-b r2] step 1 loss 0.5\n"
      "[node-b] Traceback (most recent call last):\n"
      "[node-b r3] step 1 loss 0.6\n"
      "[node-b] ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)\n"
      "[node-b] no newline at the end";
  for (size_t cut : {size_t{1}, size_t{7}, size_t{64}, log.size()}) {
    LogFilter filter(std::nullopt, kMaxLogLine, LogLabels{"node-b", {2, 3}});
    std::string out;
    for (size_t i = 0; i < log.size(); i += cut) out += filter.Feed(absl::string_view(log).substr(i, cut));
    out += filter.Finish();
    EXPECT_EQ(out, expected) << "chunks of " << cut;
  }
  // One rank: only its tagged lines; ranks not known yet: the local rank.
  LogFilter one(1, kMaxLogLine, LogLabels{"node-b", {}});
  EXPECT_EQ(one.Feed(log) + one.Finish(), "[node-b l1] step 1 loss 0.6\n");
}

// Issue 45, item 5: a rank's last line written without a newline is ended before torchrun's next
// log line (PyTorch 1.x's form and 2.x's glog form), wherever the log's reads cut it: the two
// writers never share a line. 2.x's own I and W lines are chatter, like 1.x's INFO and WARNING.
TEST(LogFilter, ARanksUnterminatedLastLineEndsBeforeTorchrunsNextLine) {
  const std::string log =
      "W1204 17:52:43.861000 549 torch/distributed/run.py:851] *****************************************\n"
      "[default0]:step 1 loss 0.5\n"
      "[default1]:giving up"
      "W1204 17:52:44.388000 549 torch/distributed/elastic/multiprocessing/api.py:1012] Sending process 572 closing "
      "signal SIGTERM\n"
      "[default0]:half a line"
      "E1204 17:52:44.488000 549 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 3)\n"
      "[default1]:" +
      std::string(100, 'y') + "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)\n";
  const std::string expected =
      "[node-b r2] step 1 loss 0.5\n"
      "[node-b r3] giving up\n"
      "[node-b r2] half a line\n"
      "[node-b] E1204 17:52:44.488000 549 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 3)\n"
      "[node-b r3] " +
      std::string(100, 'y') +
      "\n"
      "[node-b] ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)\n";
  for (size_t cut : {size_t{1}, size_t{3}, size_t{50}, size_t{64}, log.size()}) {
    LogFilter filter(std::nullopt, kMaxLogLine, LogLabels{"node-b", {2, 3}});
    std::string out;
    for (size_t i = 0; i < log.size(); i += cut) out += filter.Feed(absl::string_view(log).substr(i, cut));
    out += filter.Finish();
    EXPECT_EQ(out, expected) << "reads of " << cut;
  }
  // Raw output keeps the bytes as written.
  LogFilter raw(std::nullopt);
  EXPECT_EQ(raw.Feed(log) + raw.Finish(), log);
}

TEST(TorchrunLines, KnowsBothLogFormsAndFindsOneInsideALine) {
  EXPECT_TRUE(
      StartsTorchrunLogLine("E1204 17:52:44.488000 549 torch/distributed/elastic/multiprocessing/api.py:986] x"));
  EXPECT_TRUE(StartsTorchrunLogLine("ERROR:torch.distributed.elastic.multiprocessing.api:failed"));
  EXPECT_FALSE(StartsTorchrunLogLine("E1204 not a glog line at all, though it starts like one"));
  EXPECT_FALSE(StartsTorchrunLogLine("ERROR: my own message about torch"));
  EXPECT_TRUE(IsTorchrunChatter("I1204 17:52:43.861000 549 torch/distributed/run.py:851] starting"));
  EXPECT_FALSE(IsTorchrunChatter("E1204 17:52:44.488000 549 torch/distributed/elastic/api.py:986] failed"));
  EXPECT_TRUE(IsTorchrunOwn("E1204 17:52:44.488000 549 torch/distributed/elastic/api.py:986] failed"));
  EXPECT_EQ(FindTorchrunLogLine("abcW1204 17:52:44.388000 549 torch/distributed/x.py:1] y"), 3u);
  EXPECT_EQ(FindTorchrunLogLine("an Error of mine, no torchrun here"), absl::string_view::npos);
}

TEST(LogFilter, ALabelledLongLineIsSplitUnderItsLabel) {
  LogFilter filter(std::nullopt, /*max_line=*/200, LogLabels{"n", {5}});
  const std::string out = filter.Feed("[default0]:" + std::string(500, 'x') + "\n") + filter.Finish();
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 3u) << out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "[n r5] xxx")) << lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_TRUE(absl::StartsWith(lines[i], absl::StrCat("[n r5] ", LogFilter::kContinued))) << lines[i];
  }
  for (const auto& line : lines) EXPECT_LE(line.size(), 200u + 1) << line;
}

}  // namespace
}  // namespace hetpool::daemon
