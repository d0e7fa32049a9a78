// A GetJobLogs call's cursor (src/daemon/logs/log_cursor): a pass reads 1 MiB at most, so a call
// on a large log holds a bounded part of it in memory at a time, and the passes together return
// the whole log.
#include "src/daemon/logs/log_cursor.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

TEST(LogCursor, APassReadsAMebibyteAtMostAndThePassesReturnTheWholeLog) {
  testing::TempDir dir;
  auto store = LogStore::Open(dir.path() + "/logs");
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string line(1023, 'x');
  std::string log;
  for (int i = 0; i < 3 * 1024; ++i) log += line + "\n";  // 3 MiB
  ASSERT_TRUE((*store)->Append("job-000001", 1, "node-a", 0, log).ok());
  pb::Job job;
  job.set_id("job-000001");
  job.set_generation(1);
  job.set_state(pb::JOB_STATE_SUCCEEDED);
  job.add_placement()->set_node("node-a");
  pb::GetJobLogsRequest request;
  request.set_job_id("job-000001");
  request.set_raw(true);
  LogCursor cursor(store->get(), request);
  std::string read;
  int passes = 0;
  for (bool done = false; !done && passes < 100; ++passes) {
    auto pass = cursor.Next(job);
    ASSERT_TRUE(pass.ok()) << pass.status();
    size_t bytes = 0;
    for (const auto& chunk : pass->chunks) bytes += chunk.data().size();
    EXPECT_LE(bytes, (1u << 20) + 64 * 1024) << "pass " << passes;
    EXPECT_TRUE(pass->more || pass->done) << "a pass that stopped short must say there is more";
    for (const auto& chunk : pass->chunks) read += chunk.data();
    done = pass->done;
  }
  EXPECT_GE(passes, 3);
  EXPECT_EQ(read, log);
}

}  // namespace
}  // namespace hetpool::daemon
