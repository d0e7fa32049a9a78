#include "src/daemon/store/parse_rows.h"

#include "gtest/gtest.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool::daemon {
namespace {

std::vector<StoredRow> JobRows(int count) {
  std::vector<StoredRow> rows;
  for (int i = 0; i < count; ++i) {
    hetpool::v1::Job job;
    job.set_id("job-" + std::to_string(i));
    job.set_submit_seq(static_cast<uint64_t>(i));
    (*job.mutable_spec()->mutable_env())["RANK"] = std::to_string(i);
    rows.push_back({job.id(), job.SerializeAsString()});
  }
  return rows;
}

TEST(ParseRows, ParsesEveryRowInItsOrderOnSeveralThreads) {
  constexpr int kRows = 40'000;  // enough rows for every core this machine has, up to 8
  auto jobs = ParseRows<hetpool::v1::Job>(JobRows(kRows), "job row");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), static_cast<size_t>(kRows));
  for (int i = 0; i < kRows; ++i) {
    ASSERT_EQ((*jobs)[i].submit_seq(), static_cast<uint64_t>(i));
    ASSERT_EQ((*jobs)[i].spec().env().at("RANK"), std::to_string(i));
  }
}

TEST(ParseRows, NamesTheFirstRowThatDoesNotParseWhicheverThreadFindsIt) {
  std::vector<StoredRow> rows = JobRows(40'000);
  rows[39'000].bytes = "\xff\xff\xff\xff";  // in the last slice
  rows[12'345].bytes = "\xff\xff\xff\xff";  // earlier, in another slice when there are several
  auto jobs = ParseRows<hetpool::v1::Job>(std::move(rows), "job row");
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(jobs.status().message().find("job row 'job-12345'"), absl::string_view::npos) << jobs.status();
}

TEST(ParseRows, ThreadsFollowTheRowsTheirBytesAndTheCores) {
  const size_t all = std::min<size_t>(8, std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(ParseThreads(0, 0), 1u);
  EXPECT_EQ(ParseThreads(100, 100 * 900), 1u);
  EXPECT_LE(ParseThreads(1'000'000, 1'000'000 * 50), 8u);
  EXPECT_EQ(ParseThreads(1'000'000, 1'000'000 * 50), all);
  EXPECT_EQ(ParseThreads(5'000, 5'000 * 3'500), all);  // few rows, each large (nodes)
}

TEST(ParseRows, NoRowsIsNoMessages) {
  auto jobs = ParseRows<hetpool::v1::Job>({}, "job row");
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty());
}

}  // namespace
}  // namespace hetpool::daemon
