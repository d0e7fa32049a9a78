// The agent's wait between registrations: the whole backoff for a daemon that answered, and only
// until the address connects for one that could not be reached (a restart).
#include "src/agent/daemon_channel.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "hetpool/v1/agent.grpc.pb.h"

namespace hetpool::agent {
namespace {

// A server with the agent service (every method unimplemented): enough to connect to.
std::unique_ptr<grpc::Server> Listen(const std::string& address, int* port) {
  static hetpool::v1::AgentService::Service service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(&service);
  return builder.BuildAndStart();
}

TEST(WaitForDaemon, EndsAsSoonAsAStoppedDaemonListensAgain) {
  int port = 0;
  Listen("127.0.0.1:0", &port)->Shutdown();  // a port that was a daemon's, now refusing
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto channel = MakeDaemonChannel(address, grpc::InsecureChannelCredentials());
  std::unique_ptr<grpc::Server> restarted;
  std::atomic<int> ticks{0};
  // The daemon comes back once the wait has seen it refuse; the wait of two minutes must end then
  // (were it to run out instead, WaitForDaemon would say false).
  const bool connected = WaitForDaemon(channel.get(), absl::Minutes(2), absl::Milliseconds(20), [&] {
    if (++ticks == 10) {
      int again = 0;
      restarted = Listen(address, &again);
      EXPECT_EQ(again, port);
    }
    return true;
  });
  EXPECT_TRUE(connected);
  EXPECT_GE(ticks.load(), 10);
  if (restarted) restarted->Shutdown();
}

TEST(WaitForDaemon, WithoutAChannelWaitsTheWholeBackoff) {
  int ticks = 0;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(WaitForDaemon(nullptr, absl::Milliseconds(200), absl::Milliseconds(20), [&] { return ++ticks > 0; }));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_GE(ticks, 2);
}

TEST(WaitForDaemon, StopsWhenTheCallerSaysSo) {
  int ticks = 0;
  EXPECT_FALSE(WaitForDaemon(nullptr, absl::Minutes(2), absl::Milliseconds(20), [&] { return ++ticks < 3; }));
  EXPECT_EQ(ticks, 3);
}

}  // namespace
}  // namespace hetpool::agent
