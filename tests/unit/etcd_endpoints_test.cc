// EtcdEndpoints: an etcd member back from an outage is used by the store's very next call,
// although the call that found it gone left its channel in reconnect backoff (which fails every
// call at once); leadership's calls fail at once.
#include "src/daemon/store/etcd_endpoints.h"

#include "absl/strings/str_cat.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace hetpool::daemon {
namespace {

// An etcd that answers every range with nothing: enough to tell a call that reached it.
class EmptyKv final : public etcdserverpb::KV::Service {
  grpc::Status Range(grpc::ServerContext*, const etcdserverpb::RangeRequest*, etcdserverpb::RangeResponse*) override {
    return grpc::Status::OK;
  }
};

std::unique_ptr<grpc::Server> Listen(const std::string& address, int* port) {
  static EmptyKv service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(&service);
  return builder.BuildAndStart();
}

grpc::Status RangeOn(EtcdEndpoints& endpoints, absl::Duration timeout = absl::Seconds(2)) {
  return endpoints.Call(timeout, [](const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext& ctx) {
    etcdserverpb::RangeRequest request;
    request.set_key("/k");
    etcdserverpb::RangeResponse response;
    return etcdserverpb::KV::NewStub(channel)->Range(&ctx, request, &response);
  });
}

TEST(EtcdEndpoints, AMemberBackFromAnOutageAnswersTheNextCall) {
  int port = 0;
  auto server = Listen("127.0.0.1:0", &port);
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  EtcdEndpoints endpoints(address, /*wait_for_reconnect=*/true);
  ASSERT_TRUE(RangeOn(endpoints).ok());

  server->Shutdown();
  server.reset();
  EXPECT_EQ(RangeOn(endpoints).error_code(), grpc::StatusCode::UNAVAILABLE);  // refused: its channel now backs off
  int again = 0;
  server = Listen(address, &again);
  ASSERT_EQ(again, port);
  const grpc::Status back = RangeOn(endpoints);
  EXPECT_TRUE(back.ok()) << back.error_message();
  server->Shutdown();
}

TEST(EtcdEndpoints, WithoutWaitingACallToAnEndpointThatIsGoneFailsAtOnce) {
  int port = 0;
  Listen("127.0.0.1:0", &port)->Shutdown();
  EtcdEndpoints endpoints(absl::StrCat("127.0.0.1:", port));
  const absl::Time start = absl::Now();
  EXPECT_EQ(RangeOn(endpoints, absl::Seconds(60)).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));  // far below the call's timeout: it did not wait
}

TEST(EtcdEndpoints, AnEndpointThatRefusesIsSkippedForOneThatAnswers) {
  int dead_port = 0;
  Listen("127.0.0.1:0", &dead_port)->Shutdown();  // a port nothing listens on any more
  int port = 0;
  auto server = Listen("127.0.0.1:0", &port);
  EtcdEndpoints endpoints(absl::StrCat("127.0.0.1:", dead_port, ",127.0.0.1:", port), /*wait_for_reconnect=*/true);
  const grpc::Status status = RangeOn(endpoints);
  EXPECT_TRUE(status.ok()) << status.error_message();
  server->Shutdown();
}

}  // namespace
}  // namespace hetpool::daemon
