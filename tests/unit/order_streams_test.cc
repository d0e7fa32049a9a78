// The agents' order streams (services/order_streams.h) over real gRPC on loopback, served by the
// daemon's own AgentService in this process: what a stream sends, and each way it ends (a new
// session, a lapsed lease, the agent going away, the daemon stopping). The state's clock is the
// test's; its loop does not run (the test ticks it).
#include "src/daemon/services/order_streams.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "absl/strings/match.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "scheduler/framework/profile.h"
#include "src/common/convert.h"
#include "src/daemon/services/agent_service.h"
#include "src/daemon/store/sqlite_store.h"
#include "tests/testing/state_parts.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/eventually.h"

namespace hetpool::daemon {
namespace {

class OrderStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A disk the test can make fail.
    auto store = SqliteStore::Open(dir_.path() + "/hetpool.db", [this](int fd) {
      if (disk_fails_.load()) {
        errno = EIO;
        return -1;
      }
      return ::fdatasync(fd);
    });
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    guard_ = std::make_unique<ApiGuard>(Authenticator::Unchecked(), nullptr, std::make_unique<RateLimiter>(0, 0),
                                        store_.get());
    ClusterOptions options;
    options.lease_ttl = absl::Seconds(10);
    options.clock = [this] { return now_; };
    options.monotonic_clock = [this] { return now_ + steady_offset_; };
    state_ = std::make_unique<ClusterState>(options, store_.get(), policy_.get());
    ASSERT_TRUE(state_->Load().ok());
    streams_ = OrderStreams::Start(state_.get());
    service_ = std::make_unique<AgentServiceImpl>(state_.get(), streams_.get(), /*logs=*/nullptr, &gate_, guard_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    stub_ = pb::AgentService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    state_->Stop();
    streams_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
  }

  // Registers `node` with two H100s over the API; returns its session.
  std::string Register(const std::string& node) {
    pb::RegisterRequest req = testing::Registration(node);
    *req.mutable_inventory() = ToProto(testing::H100s(2));
    pb::RegisterResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = stub_->Register(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.session_id();
  }

  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<pb::Orders>> reader;
  };
  std::unique_ptr<Stream> Open(const std::string& node, const std::string& session) {
    auto stream = std::make_unique<Stream>();
    // A bound on every read: a stream that never sends fails the test instead of hanging it.
    stream->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    pb::StreamOrdersRequest req;
    req.set_node_name(node);
    req.set_session_id(session);
    stream->reader = stub_->StreamOrders(&stream->ctx, req);
    return stream;
  }

  // The next whole version (these orders fit one part).
  static std::optional<pb::Orders> Next(Stream& stream) {
    pb::Orders orders;
    if (!stream.reader->Read(&orders)) return std::nullopt;
    EXPECT_FALSE(orders.more());
    return orders;
  }

  // How the stream ended, once it has.
  static grpc::Status Ended(Stream& stream) {
    pb::Orders ignored;
    while (stream.reader->Read(&ignored)) {
    }
    return stream.reader->Finish();
  }

  testing::TempDir dir_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  absl::Duration steady_offset_;  // the monotonic clock is now_ plus this
  std::unique_ptr<scheduler::Framework> policy_ = scheduler::DefaultFramework();
  std::atomic<bool> disk_fails_{false};
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<ClusterState> state_;
  std::shared_ptr<OrderStreams> streams_;
  LeaderGate gate_{true};
  std::unique_ptr<ApiGuard> guard_;
  std::unique_ptr<AgentServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::AgentService::Stub> stub_;
};

TEST_F(OrderStreamsTest, SendsTheCurrentOrdersThenEachNewVersionAndEndsWithItsSession) {
  const std::string first = Register("a");
  auto stream = Open("a", first);
  std::optional<pb::Orders> orders = Next(*stream);
  ASSERT_TRUE(orders.has_value()) << Ended(*stream).error_message();
  EXPECT_EQ(orders->launches_size(), 0);
  const uint64_t initial = orders->version();

  auto job = state_->Submit(testing::TrainingSpec(1, 1), "");
  ASSERT_TRUE(job.ok()) << job.status();
  state_->Tick();  // places it on the only node
  orders = Next(*stream);
  ASSERT_TRUE(orders.has_value()) << Ended(*stream).error_message();
  EXPECT_GT(orders->version(), initial);
  ASSERT_EQ(orders->launches_size(), 1);
  EXPECT_EQ(orders->launches(0).job_id(), job->id());

  // The agent registers again (a new session): the old session's stream ends, the new one's runs.
  const std::string second = Register("a");
  ASSERT_NE(second, first);
  grpc::Status ended = Ended(*stream);
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(ended.error_message(), "register again")) << ended.error_message();
  auto renewed = Open("a", second);
  orders = Next(*renewed);
  ASSERT_TRUE(orders.has_value()) << Ended(*renewed).error_message();
  ASSERT_EQ(orders->launches_size(), 1);  // the job it runs, still
  EXPECT_EQ(orders->launches(0).job_id(), job->id());
}

// An agent acts on its orders, a caller on its answer: neither leaves before what it follows from
// is on disk, and once the disk fails neither leaves at all.
TEST_F(OrderStreamsTest, OrdersAndAnswersLeaveOnlyOnceTheirCauseIsOnDisk) {
  const std::string session = Register("a");
  EXPECT_EQ(store_->synced(), store_->writes());  // the registration was flushed before its answer
  auto stream = Open("a", session);
  ASSERT_TRUE(Next(*stream).has_value()) << Ended(*stream).error_message();

  auto job = state_->Submit(testing::TrainingSpec(1, 1), "");
  ASSERT_TRUE(job.ok()) << job.status();
  state_->Tick();  // the placement is written; no answer flushed it (the sender may be at it)
  const uint64_t placed = store_->writes();
  std::optional<pb::Orders> orders = Next(*stream);
  ASSERT_TRUE(orders.has_value()) << Ended(*stream).error_message();
  ASSERT_EQ(orders->launches_size(), 1);
  EXPECT_GE(store_->synced(), placed);  // flushed before the launch order was sent

  // The disk fails: the next placement is written but cannot be flushed, so it is never ordered,
  // and the agent's calls are answered UNAVAILABLE, naming the restart that loads the disk.
  disk_fails_.store(true);
  auto second = state_->Submit(testing::TrainingSpec(1, 1), "");
  ASSERT_TRUE(second.ok()) << second.status();
  state_->Tick();
  grpc::Status ended = Ended(*stream);
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(ended.error_message(), "Restart hetpoold")) << ended.error_message();
  pb::HeartbeatRequest beat;
  beat.set_node_name("a");
  beat.set_session_id(session);
  pb::HeartbeatResponse ignored;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status answered = stub_->Heartbeat(&ctx, beat, &ignored);
  EXPECT_EQ(answered.error_code(), grpc::StatusCode::UNAVAILABLE) << answered.error_message();
}

TEST_F(OrderStreamsTest, AStreamOfAnUnknownSessionEndsAtOnce) {
  Register("a");
  auto stream = Open("a", "not-a-session");
  EXPECT_EQ(Ended(*stream).error_code(), grpc::StatusCode::NOT_FOUND);
  auto unknown = Open("nowhere", "");
  EXPECT_EQ(Ended(*unknown).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(OrderStreamsTest, ALapsedLeaseEndsTheStream) {
  auto stream = Open("a", Register("a"));
  ASSERT_TRUE(Next(*stream).has_value());
  now_ += absl::Seconds(11);  // past the 10 s lease without a heartbeat
  state_->Tick();
  grpc::Status ended = Ended(*stream);
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::NOT_FOUND) << ended.error_message();
}

TEST_F(OrderStreamsTest, AStreamWhoseAgentWentAwayIsLetGo) {
  auto stream = Open("a", Register("a"));
  ASSERT_TRUE(Next(*stream).has_value());
  EXPECT_EQ(streams_->open_streams(), 1u);
  stream->ctx.TryCancel();
  EXPECT_EQ(Ended(*stream).error_code(), grpc::StatusCode::CANCELLED);
  // The daemon learns it from gRPC (no thread polls the call): wait for it, bounded.
  EXPECT_TRUE(hetpool::testing::Eventually([&] { return streams_->open_streams() == 0; }, absl::Seconds(30),
                                           absl::Milliseconds(10)));
}

TEST_F(OrderStreamsTest, StoppingEndsEveryStreamAndRefusesNewOnes) {
  std::vector<std::unique_ptr<Stream>> open;
  for (const std::string node : {"a", "b", "c"}) {
    open.push_back(Open(node, Register(node)));
    ASSERT_TRUE(Next(*open.back()).has_value());
  }
  const std::string session = Register("d");
  streams_->Stop();
  for (auto& stream : open) {
    grpc::Status ended = Ended(*stream);
    EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(absl::StrContains(ended.error_message(), "shutting down")) << ended.error_message();
  }
  auto late = Open("d", session);
  EXPECT_EQ(Ended(*late).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace hetpool::daemon
