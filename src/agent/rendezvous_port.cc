#include "src/agent/rendezvous_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hetpool::agent {

namespace {

// errno of binding a listening socket of `family` to the any-address at `port`; 0 when it binds,
// or when the host has no such family.
int BindError(int family, int port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = 0;
  if (family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));  // the IPv4 side is tried on its own
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  const int error = rc == 0 ? 0 : errno;
  close(fd);
  return error == EADDRNOTAVAIL || error == EAFNOSUPPORT ? 0 : error;
}

}  // namespace

int HostedRendezvousPort(const std::vector<std::string>& argv) {
  std::string endpoint;
  bool hosts = false;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--rdzv_endpoint") endpoint = argv[i + 1];
    if (argv[i] == "--rdzv_conf" && absl::StrContains(argv[i + 1], "is_host=1")) hosts = true;
  }
  const size_t colon = endpoint.rfind(':');
  int port = 0;
  if (!hosts || colon == std::string::npos || !absl::SimpleAtoi(endpoint.substr(colon + 1), &port)) return 0;
  return port > 0 && port < 65536 ? port : 0;
}

std::string WhyRendezvousPortUnusable(int port) {
  for (const int family : {AF_INET, AF_INET6}) {
    if (const int error = BindError(family, port); error != 0) {
      return error == EADDRINUSE
                 ? absl::StrCat("rendezvous port ", port, " is in use on this node by another process")
                 : absl::StrCat("rendezvous port ", port, " cannot be bound on this node: ", strerror(error));
    }
  }
  return "";
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t size = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

bool SaysRendezvousBindFailed(absl::string_view log) {
  // PyTorch's TCPStore: "The server socket has failed to bind to [::]:29500 (errno: 98 - Address
  // already in use)."
  return absl::StrContains(log, "errno: 98 - Address already in use") || absl::StrContains(log, "EADDRINUSE");
}

}  // namespace hetpool::agent
