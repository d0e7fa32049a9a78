#include "src/daemon/store/sqlite_store.h"
#include "src/daemon/store/sqlite_recovery.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/testing/read_file.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::daemon {
namespace {

hetpool::v1::Job MakeJob(int seq, hetpool::v1::JobState state) {
  hetpool::v1::Job job;
  job.set_id("job-" + std::to_string(seq));
  job.set_submit_seq(static_cast<uint64_t>(seq));
  job.set_state(state);
  job.mutable_spec()->set_user("alice");
  job.mutable_spec()->add_command("true");
  return job;
}

// Issue 14, item 11: a damaged store is refused whole, naming the file, instead of loading part.
TEST(SqliteStore, RefusesATruncatedStore) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  { std::ofstream touch(path); }
  auto store = SqliteStore::Open(path);
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_NE(store.status().message().find(path), absl::string_view::npos);
}

hetpool::v1::Job FinishedJob(int seq) {
  hetpool::v1::Job job = MakeJob(seq, hetpool::v1::JOB_STATE_SUCCEEDED);
  job.mutable_finished_at()->set_seconds(1'700'000'000 + seq);
  return job;
}

// The root page of `index` in the file at `path`, and the file's page size.
void RootPageOf(const std::string& path, const char* index, int* root, int* page_size) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name=?1", -1, &stmt, nullptr);
  sqlite3_bind_text(stmt, 1, index, -1, SQLITE_STATIC);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  *root = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  *page_size = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// Overwrites bytes inside the root page of `index`, as a bad sector would.
void DamageIndex(const std::string& path, const char* index) {
  int root = 0, page_size = 0;
  RootPageOf(path, index, &root, &page_size);
  ASSERT_GT(root, 1);
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(root - 1) * page_size + 12);
  const std::string junk(64, '\x5a');
  file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
}

// Writes 300 jobs, then damages the seq index.
void WriteStoreWithADamagedIndex(const std::string& path) {
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok());
    for (int i = 1; i <= 300; ++i) ASSERT_TRUE((*store)->PutJob(MakeJob(i, hetpool::v1::JOB_STATE_PENDING)).ok());
  }
  DamageIndex(path, "jobs_seq");
}

// Stores finished jobs 1..300 and archives them, as retention does.
void ArchiveThreeHundredJobs(SqliteStore& store) {
  std::vector<hetpool::v1::Job> finished;
  for (int i = 1; i <= 300; ++i) finished.push_back(FinishedJob(i));
  ASSERT_TRUE(store.PutAll(finished, {}).ok());
  ASSERT_TRUE(store.ArchiveJobs(finished, /*keep=*/true).ok());
}

// Archives 300 finished jobs and writes 20 live ones, then damages the archive's index.
void WriteStoreWithADamagedArchive(const std::string& path) {
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok());
    ArchiveThreeHundredJobs(**store);
    for (int i = 301; i <= 320; ++i) ASSERT_TRUE((*store)->PutJob(MakeJob(i, hetpool::v1::JOB_STATE_PENDING)).ok());
  }
  DamageIndex(path, "archived_jobs_finished");
}

TEST(SqliteStore, RefusesAStoreWithADamagedIndex) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  WriteStoreWithADamagedIndex(path);
  auto store = SqliteStore::Open(path);
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_NE(store.status().message().find("damaged"), absl::string_view::npos) << store.status();
  EXPECT_NE(store.status().message().find("--recover"), absl::string_view::npos) << store.status();
}

// Changes the first "job-15" key in the root page of the id index to "job-16": every page stays
// well formed and in order, as after a bad sector inside a key.
void DamageIdIndexKey(const std::string& path) {
  int root = 0, page_size = 0;
  RootPageOf(path, "sqlite_autoindex_jobs_1", &root, &page_size);
  std::string file = testing::ReadAll(path);
  const size_t page_at = static_cast<size_t>(root - 1) * page_size;
  const size_t key = file.find("job-15", page_at);
  ASSERT_LT(key, page_at + page_size) << "no job-15 key in the index's root page";
  file[key + 5] = '6';
  std::ofstream(path, std::ios::binary | std::ios::trunc) << file;
}

// What SQLite's own quick_check says of the file at `path`.
std::string QuickCheck(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &stmt, nullptr);
  std::string result =
      sqlite3_step(stmt) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)) : "";
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return result;
}

// Leaves a WAL beside the store, as a daemon killed with SIGKILL does: a write whose connection
// closes without checkpointing.
void LeaveAWal(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  ASSERT_EQ(sqlite3_exec(db, "INSERT OR REPLACE INTO meta (key, value) VALUES ('test', 1)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ASSERT_GT(std::filesystem::file_size(path + "-wal"), 0u);
}

// Issue 60, item 3: one key of the id index changed in place. quick_check passes it, so before
// both a start and --recover passed, and the next write of job-15 added a second row for its id.
// A start after a shutdown that was not clean (a WAL left behind) compares the indexes with their
// table and refuses; --recover always compares them, and rebuilds the store.
TEST(SqliteStore, AnIndexKeyDamagedInPlaceIsFoundAndRebuilt) {
  for (const bool clean_shutdown : {true, false}) {
    SCOPED_TRACE(clean_shutdown ? "after a clean shutdown" : "after a kill");
    testing::TempDir dir;
    const std::string path = dir.path() + "/hetpool.db";
    {
      auto store = SqliteStore::Open(path);
      ASSERT_TRUE(store.ok());
      for (int i = 1; i <= 30; ++i) ASSERT_TRUE((*store)->PutJob(MakeJob(i, hetpool::v1::JOB_STATE_PENDING)).ok());
    }
    DamageIdIndexKey(path);
    ASSERT_EQ(QuickCheck(path), "ok") << "the damage is not of the kind quick_check misses";
    if (!clean_shutdown) {
      LeaveAWal(path);
      auto refused = SqliteStore::Open(path);
      ASSERT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
      EXPECT_TRUE(absl::StrContains(refused.status().message(), "--recover")) << refused.status();
    }
    auto checked = SqliteStore::Open(path, SqliteStore::OpenOptions{.check_indexes = true});
    ASSERT_TRUE(absl::IsFailedPrecondition(checked.status())) << "--recover's check passed a damaged index";
    EXPECT_TRUE(absl::StrContains(checked.status().message(), "damaged")) << checked.status();

    auto report = RecoverSqliteStore(path, /*seq_floor=*/0);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->jobs, 30u);
    auto store = SqliteStore::Open(path, SqliteStore::OpenOptions{.check_indexes = true});
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutJob(MakeJob(15, hetpool::v1::JOB_STATE_RUNNING)).ok());
    auto rows = (*store)->LoadJobRows();
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->size(), 30u) << "a write added a second row for an id";
  }
}

TEST(SqliteRecovery, RebuildsFromTheReadableRowsAndKeepsTheDamagedFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  WriteStoreWithADamagedIndex(path);
  auto report = RecoverSqliteStore(path, /*seq_floor=*/0);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs, 300u);  // only the index was hit: every row is still readable
  EXPECT_EQ(report->highest_job_seq, 300u);
  EXPECT_TRUE(std::filesystem::exists(report->damaged_copy));
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 300u);
  EXPECT_EQ(jobs->front().id(), "job-1");  // in submission order again, through the rebuilt index
  EXPECT_EQ(*(*store)->HighestJobSeq(), 300u);
}

// Issue 45, item 3: a table whose root page is damaged cannot be scanned at all, though every
// leaf page under it is whole: --recover reads them page by page, overflow chains included.
TEST(SqliteRecovery, ReadsPageByPageTheRowsATableScanCannotReach) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok());
    for (int i = 1; i <= 300; ++i) {
      hetpool::v1::Job job = MakeJob(i, hetpool::v1::JOB_STATE_PENDING);
      // Most rows fit a page; every 50th runs into overflow pages.
      (*job.mutable_spec()->mutable_env())["PAD"] = std::string(i % 50 == 0 ? 9000 : 900, 'p');
      ASSERT_TRUE((*store)->PutJob(job).ok());
    }
    hetpool::v1::Node node;
    node.set_name("node-a");
    ASSERT_TRUE((*store)->PutNode(node).ok());
  }
  DamageIndex(path, "jobs");  // the table's own root page
  EXPECT_TRUE(absl::IsFailedPrecondition(SqliteStore::Open(path).status()));
  auto report = RecoverSqliteStore(path, /*seq_floor=*/0);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs, 300u);
  EXPECT_GE(report->salvaged, 300u) << "the table scan could read nothing past its root";
  EXPECT_EQ(report->nodes, 1u);
  EXPECT_EQ(report->highest_job_seq, 300u);
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 300u);
  EXPECT_EQ((*jobs)[49].spec().env().at("PAD").size(), 9000u);  // job-50, read through its overflow chain
  EXPECT_EQ((*jobs)[0].id(), "job-1");
}

// Issue 19: a start never walks the archive. A damaged archive does not stop the start; its
// check (run after the daemon serves) finds it, and from then on nothing more is written into it.
TEST(SqliteStore, ADamagedArchiveIsFoundApartFromTheStartAndNotWrittenAgain) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  WriteStoreWithADamagedArchive(path);
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 20u);

  const absl::Status check = (*store)->CheckArchive();
  EXPECT_TRUE(absl::IsFailedPrecondition(check)) << check;
  EXPECT_NE(check.message().find(path), absl::string_view::npos) << check;
  EXPECT_NE(check.message().find("--recover"), absl::string_view::npos) << check;
  const absl::Status refused = (*store)->ArchiveJobs({(*jobs)[0]}, /*keep=*/true);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;  // refused before SQLite is asked
  EXPECT_NE(refused.message().find("damaged"), absl::string_view::npos) << refused;
  auto after = (*store)->LoadJobs();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 20u);  // the refused job is still live
}

TEST(SqliteStore, AWholeArchivePassesItsCheck) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok());
  ArchiveThreeHundredJobs(**store);
  EXPECT_TRUE((*store)->CheckArchive().ok());
  ASSERT_TRUE((*store)->PutJob(MakeJob(301, hetpool::v1::JOB_STATE_SUCCEEDED)).ok());
  EXPECT_TRUE((*store)->ArchiveJobs({FinishedJob(301)}, /*keep=*/true).ok());
}

// --recover used to rebuild the live rows only: every archived job was lost with the old file.
TEST(SqliteRecovery, KeepsTheArchive) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  WriteStoreWithADamagedArchive(path);
  auto report = RecoverSqliteStore(path, /*seq_floor=*/0);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs, 20u);
  EXPECT_EQ(report->archived, 300u);  // only the index was hit: every row is still readable
  EXPECT_EQ(report->highest_job_seq, 320u);
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->CheckArchive().ok());
  auto archived = (*store)->GetArchivedJob("job-7");
  ASSERT_TRUE(archived.ok()) << archived.status();
  ASSERT_TRUE(archived->has_value());
  EXPECT_EQ((*archived)->finished_at().seconds(), 1'700'000'007);
  auto since = (*store)->ArchivedJobsSince(absl::FromUnixSeconds(1'700'000'101));
  ASSERT_TRUE(since.ok());
  EXPECT_EQ(since->size(), 200u);
  EXPECT_EQ((*store)->LoadJobs()->size(), 20u);
}

TEST(SqliteRecovery, ATruncatedStoreRestartsEmptyWithIdsAboveTheFloor) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  { std::ofstream touch(path); }
  auto report = RecoverSqliteStore(path, /*seq_floor=*/41);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs, 0u);
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->HighestJobSeq(), 41u);
}

TEST(SqliteStore, PersistsJobsAndNodesAcrossReopen) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  {
    auto store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 3; i >= 1; --i) ASSERT_TRUE((*store)->PutJob(MakeJob(i, hetpool::v1::JOB_STATE_PENDING)).ok());
    ASSERT_TRUE((*store)->PutJob(MakeJob(2, hetpool::v1::JOB_STATE_RUNNING)).ok());  // update
    hetpool::v1::Node node;
    node.set_name("node-a");
    node.set_drained(true);
    ASSERT_TRUE((*store)->PutNode(node).ok());
  }
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].id(), "job-1");  // submission order, not insertion order
  EXPECT_EQ((*jobs)[1].state(), hetpool::v1::JOB_STATE_RUNNING);
  EXPECT_EQ((*jobs)[2].id(), "job-3");
  auto nodes = (*store)->LoadNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_TRUE((*nodes)[0].drained());
}

// Writes made under the state lock do not wait for the disk; Sync flushes the WAL file once for
// every write before it, then the mark of acknowledged job numbers when they rose, and a flush
// that fails stops the store for good.
TEST(SqliteStore, SyncFlushesTheWalFileOnceForEveryWriteBeforeIt) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  int flushes = 0, acked_flushes = 0;
  bool flushed_the_wal_first = true;
  auto store = SqliteStore::Open(path, [&](int fd) {
    struct stat held {
    }, wal{}, acked{};
    ::fstat(fd, &held);
    if (::stat((path + "-wal").c_str(), &wal) == 0 && held.st_ino == wal.st_ino) {
      ++flushes;
    } else if (::stat(SqliteStore::AckedPath(path).c_str(), &acked) == 0 && held.st_ino == acked.st_ino) {
      ++acked_flushes;
      flushed_the_wal_first = flushed_the_wal_first && flushes == acked_flushes;
    } else {
      flushed_the_wal_first = false;  // some other file
    }
    return ::fdatasync(fd);
  });
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE((*store)->PutJob(MakeJob(i, hetpool::v1::JOB_STATE_PENDING)).ok());
  EXPECT_EQ(flushes, 0);  // the writes returned without waiting for the disk
  EXPECT_LT((*store)->synced(), (*store)->writes());
  ASSERT_TRUE((*store)->Sync().ok());
  EXPECT_EQ(flushes, 1);
  EXPECT_EQ(acked_flushes, 1);
  EXPECT_TRUE(flushed_the_wal_first);
  EXPECT_EQ(*SqliteStore::ReadAcked(path), 3u);
  EXPECT_EQ((*store)->synced(), (*store)->writes());
  ASSERT_TRUE((*store)->Sync().ok());  // nothing written since: no flush
  EXPECT_EQ(flushes, 1);
  hetpool::v1::Node node;
  node.set_name("node-a");
  ASSERT_TRUE((*store)->PutNode(node).ok());
  ASSERT_TRUE((*store)->Sync().ok());
  EXPECT_EQ(flushes, 2);
  EXPECT_EQ(acked_flushes, 1);  // no new job number: the mark stands
}

// Issue 45, item 2: acknowledged submissions in the WAL of a store whose daemon was killed with
// SIGKILL; the WAL then damaged (16 bytes flipped a third of the way in) or truncated to half.
// SQLite reads a WAL up to its first bad frame and says nothing: before, hetpoold started and
// listed 13 (or 23) of 50 jobs and gave out job-000014 again. The store is refused, naming the
// WAL and --recover, and --recover continues ids above every acknowledged one.
class DamagedWal : public ::testing::TestWithParam<std::string> {};

TEST_P(DamagedWal, IsRefusedAndRecoverKeepsEveryAcknowledgedId) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  const pid_t writer = fork();
  if (writer == 0) {
    // The daemon: 50 submissions, each acknowledged (flushed) on its own, then killed: the WAL is
    // never checkpointed into the database.
    auto store = SqliteStore::Open(path);
    if (!store.ok()) _exit(2);
    for (int i = 1; i <= 50; ++i) {
      if (!(*store)->PutJob(MakeJob(i, hetpool::v1::JOB_STATE_PENDING)).ok() || !(*store)->Sync().ok()) _exit(3);
    }
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(writer, &status, 0), writer);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed: " << status;
  const std::string wal = path + "-wal";
  const auto size = std::filesystem::file_size(wal);
  ASSERT_GT(size, 50u * 1024) << "the jobs are not in the WAL";
  if (GetParam() == "flipped") {
    std::fstream file(wal, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(size / 3));
    file.write("\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef", 16);
  } else if (GetParam() == "frame_checksum") {
    // The stored checksum of a frame a third of the way in (32-byte log header, frames of a
    // 24-byte header and a 4096-byte page), its page whole.
    constexpr std::streamoff kFrame = 24 + 4096;
    std::fstream file(wal, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(32 + (static_cast<std::streamoff>(size) - 32) / kFrame / 3 * kFrame + 16);
    file.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  } else {
    std::filesystem::resize_file(wal, size / 2);
  }
  const std::string wal_before = testing::ReadAll(wal);
  const std::string db_before = testing::ReadAll(path);
  for (int start = 0; start < 2; ++start) {  // a start refused twice, as a restart loop would
    auto refused = SqliteStore::Open(path);
    ASSERT_TRUE(absl::IsFailedPrecondition(refused.status())) << "a damaged WAL was loaded: " << refused.status();
    EXPECT_NE(refused.status().message().find(wal), absl::string_view::npos) << refused.status();
    EXPECT_NE(refused.status().message().find("--recover"), absl::string_view::npos) << refused.status();
    EXPECT_NE(refused.status().message().find("up to 50 were acknowledged"), absl::string_view::npos)
        << refused.status();
  }
  // Issue 60, item 1: the refused starts checkpointed the WAL's readable part into the database
  // and deleted the WAL, and with it the 36 acknowledged jobs in the frames past the flip.
  EXPECT_EQ(testing::ReadAll(wal), wal_before) << "a refused start changed the WAL";
  EXPECT_EQ(testing::ReadAll(path), db_before) << "a refused start wrote into the database";

  auto report = RecoverSqliteStore(path, /*seq_floor=*/0);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->highest_job_seq, 50u);
  EXPECT_EQ(testing::ReadAll(report->damaged_copy + "-wal"), wal_before) << "the damaged WAL is not kept whole";
  if (GetParam() != "truncated") {
    // Every frame past the damaged one is intact and read: all 50 come back.
    EXPECT_EQ(report->wal.damaged, 1u);
    EXPECT_GT(report->wal.past_first_damage, 0u);
    EXPECT_EQ(report->jobs, 50u);
  } else {
    EXPECT_GT(report->jobs, 0u);
    EXPECT_LT(report->jobs, 50u);
  }
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->HighestJobSeq(), 50u) << "the next job would reuse an acknowledged id";
  auto rows = (*store)->LoadJobRows();
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), report->jobs);
  EXPECT_FALSE(std::filesystem::exists(report->damaged_copy + "-frames")) << "the derived image is left behind";
}

INSTANTIATE_TEST_SUITE_P(SqliteStore, DamagedWal, ::testing::Values("flipped", "frame_checksum", "truncated"),
                         [](const ::testing::TestParamInfo<std::string>& damage) { return damage.param; });

// Many callers at once (the daemon's RPC threads): each Sync returns only once a flush that
// began after its write ended, and callers share flushes.
TEST(SqliteStore, ConcurrentSyncsEachWaitForAFlushCoveringTheirWrite) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  std::atomic<int> flushes{0};
  auto store = SqliteStore::Open(path, [&](int fd) {
    ++flushes;
    return ::fdatasync(fd);
  });
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr int kThreads = 8, kEach = 40;
  std::atomic<int> uncovered{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (!(*store)->PutJob(MakeJob(1 + t * kEach + i, hetpool::v1::JOB_STATE_PENDING)).ok()) ++failed;
        const uint64_t written = (*store)->writes();  // this caller's write among them
        if (!(*store)->Sync().ok()) ++failed;
        if ((*store)->synced() < written) ++uncovered;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(uncovered.load(), 0);
  EXPECT_EQ((*store)->synced(), (*store)->writes());
  EXPECT_GE(flushes.load(), 1);
  EXPECT_LE(flushes.load(), kThreads * kEach);
}

TEST(SqliteStore, AFailedFlushRefusesEveryWriteAfterIt) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  int flushes = 0;
  {
    auto store = SqliteStore::Open(path, [&](int) {
      ++flushes;
      errno = EIO;
      return -1;
    });
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutJob(MakeJob(1, hetpool::v1::JOB_STATE_PENDING)).ok());
    absl::Status synced = (*store)->Sync();
    EXPECT_TRUE(absl::IsUnavailable(synced)) << synced;
    EXPECT_TRUE(absl::StrContains(synced.message(), "fdatasync " + path + "-wal")) << synced;
    EXPECT_TRUE(absl::StrContains(synced.message(), "Restart hetpoold")) << synced;
    // From now on nothing is written, and every Sync answers the same without trying again.
    EXPECT_TRUE(absl::IsUnavailable((*store)->PutJob(MakeJob(2, hetpool::v1::JOB_STATE_PENDING))));
    hetpool::v1::Node node;
    node.set_name("node-a");
    EXPECT_TRUE(absl::IsUnavailable((*store)->PutNode(node)));
    EXPECT_TRUE(absl::IsUnavailable((*store)->ArchiveJobs({MakeJob(1, hetpool::v1::JOB_STATE_PENDING)}, true)));
    EXPECT_EQ((*store)->Sync(), synced);
    EXPECT_EQ(flushes, 1);
  }
  // The restart the message asks for loads what the file holds: the write before the failure.
  auto reopened = SqliteStore::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto jobs = (*reopened)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id(), "job-1");
}

TEST(SqliteStore, UsesWalJournal) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->PutJob(MakeJob(1, hetpool::v1::JOB_STATE_PENDING)).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(SqliteStore, CorruptRowIsDataLossNotCrash) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  ASSERT_TRUE(SqliteStore::Open(path).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO jobs VALUES ('job-9', 9, 1, 'x', x'ffffffff')", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->LoadJobs().status().code(), absl::StatusCode::kDataLoss);
}

TEST(SqliteStore, RefusesNewerSchema) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/hetpool.db";
  ASSERT_TRUE(SqliteStore::Open(path).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  EXPECT_EQ(SqliteStore::Open(path).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SqliteStore, UnwritablePathIsAnError) {
  EXPECT_FALSE(SqliteStore::Open("/nonexistent-dir/for/sure/hetpool.db").ok());
}

}  // namespace
}  // namespace hetpool::daemon
