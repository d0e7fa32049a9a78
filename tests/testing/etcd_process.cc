#include "tests/testing/etcd_process.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace hetpool::testing {
namespace {
constexpr char kEtcdBinary[] = "/usr/bin/etcd";  // Debian's etcd-server
}  // namespace

int FreeTcpPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

namespace {

bool Accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

absl::Status EtcdProcess::Start() {
  if (absl::Status s = Spawn(); !s.ok()) return s;
  return WaitServing();
}

absl::Status EtcdProcess::Spawn() {
  if (client_port_ == 0) {
    client_port_ = FreeTcpPort();
    peer_port_ = FreeTcpPort();
  }
  const std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
  const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
  const std::string cluster = initial_cluster_.empty() ? name_ + "=" + peer : initial_cluster_;
  auto process = ChildProcess::Spawn(
      {kEtcdBinary, "--name", name_, "--data-dir", dir_ + "/etcd-data-" + name_, "--listen-client-urls", client,
       "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
       "--initial-cluster", cluster, "--initial-cluster-state", "new", "--log-level", "warn"},
      dir_ + "/etcd-" + name_ + ".log");
  if (!process.ok()) return process.status();
  process_ = *std::move(process);
  return absl::OkStatus();
}

absl::Status EtcdProcess::WaitServing() {
  for (absl::Time deadline = absl::Now() + absl::Seconds(20); absl::Now() < deadline;) {
    if (Accepts(client_port_)) return absl::OkStatus();
    if (process_->Wait(absl::Milliseconds(50))) return absl::InternalError("etcd exited at start:\n" + Log());
  }
  return absl::DeadlineExceededError("etcd did not start:\n" + Log());
}

EtcdCluster::EtcdCluster(const std::string& dir, int members) {
  std::vector<std::pair<int, int>> ports;
  std::string initial;
  for (int i = 0; i < members; ++i) {
    ports.emplace_back(FreeTcpPort(), FreeTcpPort());
    absl::StrAppend(&initial, i ? "," : "", "m", i, "=http://127.0.0.1:", ports.back().second);
  }
  for (int i = 0; i < members; ++i) {
    members_.push_back(std::make_unique<EtcdProcess>(dir, absl::StrCat("m", i), ports[static_cast<size_t>(i)].first,
                                                     ports[static_cast<size_t>(i)].second, initial));
  }
}

absl::Status EtcdCluster::Start() {
  // Members wait for each other to form a quorum, so each must be started before any serves.
  for (auto& m : members_) {
    if (absl::Status s = m->Spawn(); !s.ok()) return s;
  }
  for (auto& m : members_) {
    if (absl::Status s = m->WaitServing(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (const auto& m : members_) absl::StrAppend(&out, out.empty() ? "" : ",", m->endpoint());
  return out;
}

void EtcdProcess::Kill(int sig) {
  if (!process_) return;
  process_->Signal(sig);
  process_->Wait(absl::Seconds(10));
  process_.reset();
}

std::string EtcdProcess::Log() const {
  std::ifstream in(dir_ + "/etcd-" + name_ + ".log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace hetpool::testing
