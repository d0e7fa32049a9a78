// The rendezvous port a launch hosts (issue 62): read from torchrun's argv, checked bindable the
// way torchrun's store binds it, and a bind failure read from torchrun's output. Binds sockets.
#include "src/agent/rendezvous_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace hetpool::agent {
namespace {

TEST(RendezvousPort, OnlyTheHostingNodesPortIsItsOwn) {
  const std::vector<std::string> host = {"torchrun", "--rdzv_endpoint", "10.0.0.1:29517", "--rdzv_conf", "is_host=1"};
  EXPECT_EQ(HostedRendezvousPort(host), 29517);
  EXPECT_EQ(HostedRendezvousPort(
                {"torchrun", "--rdzv_endpoint", "10.0.0.1:29517", "--rdzv_conf", "is_host=1,last_call_timeout=5"}),
            29517);
  EXPECT_EQ(HostedRendezvousPort({"torchrun", "--rdzv_endpoint", "10.0.0.1:29517", "--rdzv_conf", "is_host=0"}), 0);
  EXPECT_EQ(HostedRendezvousPort({"torchrun", "--rdzv_endpoint", "127.0.0.1:0", "--rdzv_conf", "is_host=1"}), 0);
  EXPECT_EQ(HostedRendezvousPort({"torchrun", "train.py"}), 0);
}

TEST(RendezvousPort, APortAnotherProcessListensOnIsUnusable) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // even on loopback alone
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  EXPECT_EQ(WhyRendezvousPortUnusable(port),
            absl::StrCat("rendezvous port ", port, " is in use on this node by another process"));
  close(fd);
  EXPECT_EQ(WhyRendezvousPortUnusable(port), "");  // closed: usable again (TIME_WAIT is no obstacle)
}

TEST(RendezvousPort, AFreePortIsOneNothingListensOn) {
  const int port = PickFreePort();
  ASSERT_GT(port, 0);
  EXPECT_EQ(WhyRendezvousPortUnusable(port), "");
}

TEST(RendezvousPort, TorchrunsBindFailureIsRead) {
  EXPECT_TRUE(SaysRendezvousBindFailed(
      "RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
      "failed to bind to [::]:29500 (errno: 98 - Address already in use)."));
  EXPECT_FALSE(SaysRendezvousBindFailed("RuntimeError: Connection refused"));
}

}  // namespace
}  // namespace hetpool::agent
