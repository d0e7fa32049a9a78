// A real single-member etcd (Debian's etcd-server) for tests: 127.0.0.1, ephemeral ports, data in
// a temporary directory; stopped when the object goes away.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {

class EtcdProcess {
 public:
  // `dir` holds the data directory and the log; it must outlive the process.
  explicit EtcdProcess(std::string dir) : dir_(std::move(dir)) {}
  // Starts etcd (on new free ports the first time, the same ones after Kill) and waits until it
  // serves. Data in the directory from an earlier run is kept.
  absl::Status Start();
  void Kill(int sig);  // and reap
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  std::string Log() const;

 private:
  std::string dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeTcpPort();

}  // namespace hetpool::testing
