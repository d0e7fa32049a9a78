// A real single-member etcd (Debian's etcd-server) for tests: 127.0.0.1, ephemeral ports, data in
// a temporary directory; stopped when the object goes away.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {

class EtcdProcess {
 public:
  // `dir` holds the data directory and the log; it must outlive the process.
  explicit EtcdProcess(std::string dir) : dir_(std::move(dir)) {}
  // A member of a cluster: its name, ports chosen by the caller, and every member's
  // "name=http://127.0.0.1:peer_port" joined by commas.
  EtcdProcess(std::string dir, std::string name, int client_port, int peer_port, std::string initial_cluster)
      : dir_(std::move(dir)),
        name_(std::move(name)),
        client_port_(client_port),
        peer_port_(peer_port),
        initial_cluster_(std::move(initial_cluster)) {}
  // Starts etcd (on new free ports the first time, the same ones after Kill) and waits until it
  // serves. Data in the directory from an earlier run is kept.
  absl::Status Start();
  absl::Status Spawn();        // Start's first half: the process, without waiting
  absl::Status WaitServing();  // Start's second half
  void Kill(int sig);          // and reap
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  std::string Log() const;

 private:
  std::string dir_;
  std::string name_ = "test";
  int client_port_ = 0;
  int peer_port_ = 0;
  std::string initial_cluster_;  // empty: a cluster of this one member
  std::unique_ptr<ChildProcess> process_;
};

// Three (or n) etcd members on 127.0.0.1 forming one cluster.
class EtcdCluster {
 public:
  EtcdCluster(const std::string& dir, int members);
  absl::Status Start();           // all members, then waits until each serves
  std::string endpoints() const;  // host:port,host:port,...
  EtcdProcess& member(size_t i) { return *members_[i]; }

 private:
  std::vector<std::unique_ptr<EtcdProcess>> members_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeTcpPort();

}  // namespace hetpool::testing
