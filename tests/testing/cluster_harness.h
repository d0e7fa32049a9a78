// Runs a real hetpool cluster for integration tests: hetpoold and agents as child processes on
// 127.0.0.1 ephemeral ports, in a temporary directory, always stopped when the test ends.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "grpcpp/channel.h"
#include "hetpool/v1/cluster.grpc.pb.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {

namespace pb = ::hetpool::v1;

// A child process with its output in a file; stopped (SIGTERM, then SIGKILL) on destruction.
class ChildProcess {
 public:
  // `env` entries are set in the child only, before exec.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, const std::string& log_path,
      const std::vector<std::pair<std::string, std::string>>& env = {});
  ~ChildProcess();
  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // The exit status once the process ended, or nullopt after `timeout`.
  std::optional<int> Wait(absl::Duration timeout);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  bool reaped_ = false;
};

struct AgentSpec {
  std::string name;
  std::string inventory_file;         // sim backend: copied into the cluster's directory (tests may edit the copy)
  std::vector<std::string> backends;  // when no inventory_file, e.g. {"auto"}
  std::vector<std::pair<std::string, std::string>> env;  // e.g. HETPOOL_VENDOR_LIB_PATH for fakes
  std::vector<std::string> labels;                       // --label k=v
  std::vector<std::string> args;                         // more agent flags
  std::string job_dirs;  // --job-dirs instead of the source tree and /tmp (--job-dirs adds up)
};

// Whether `pid` is a live process (not gone, not a zombie).
bool ProcessAlive(pid_t pid);
// Every live process whose environment holds `marker` ("NAME=VALUE"), with its environment.
struct MarkedProcess {
  pid_t pid = 0;
  std::map<std::string, std::string> env;
};
std::vector<MarkedProcess> MarkedProcesses(const std::string& marker);

// A channel that reconnects within half a second (gRPC's default backoff grows to two minutes):
// for tests and benches whose daemons come and go.
std::shared_ptr<grpc::Channel> FastReconnectChannel(const std::string& address);

// Submits on whichever replica accepts (null entries are down), retrying every 100 ms until
// `patience` runs out: what a client that knows every replica does.
absl::StatusOr<pb::Job> SubmitToAnyReplica(const std::vector<pb::JobService::Stub*>& replicas,
                                           const pb::SubmitJobRequest& request, absl::Duration patience);

// The flags every test agent started outside TestCluster takes (ha, chaos, CLI tests): plaintext
// to a daemon run with --insecure, the job directories the tests' jobs use (the source tree,
// /tmp) and, when the tests run as root, root job processes (the sandbox test checks the default).
std::vector<std::string> PlainAgentFlags(const std::string& job_dirs = "");

// hetpoold's exit status and what it printed, for flags it must refuse before serving.
std::pair<int, std::string> RunRefusedDaemon(const std::string& flags);

class TestCluster {
 public:
  struct Options {
    std::vector<AgentSpec> agents;
    absl::Duration lease_ttl = absl::Seconds(10);
    // After the lease, how long a silent node's jobs stay (hetpoold --orphan-grace): agents fence
    // at this much silence, as they did at 80% of the lease before the grace existed.
    absl::Duration orphan_grace = absl::Seconds(8);
    std::vector<std::string> daemon_args;  // extra hetpoold flags, e.g. {"--store", "etcd://..."}
    std::vector<std::pair<std::string, std::string>> daemon_env;  // set in hetpoold's environment only
    // TLS everywhere (deploy/pki.sh makes a CA, the daemon's and each agent's certificate) and a
    // token file holding an admin token the harness's own calls use; else --insecure.
    bool tls = false;
  };
  // Two agents simulating deploy/examples/node-a.json and node-b.json.
  static Options ExamplePool();

  explicit TestCluster(Options options);
  ~TestCluster();

  // Starts hetpoold (on `port`, or a free one) and waits until it serves (at most `patience`).
  absl::Status StartDaemon(int port = 0, absl::Duration patience = absl::Seconds(20));
  absl::Status StartAgent(size_t index);
  // Daemon, every agent, and waits until all nodes are Ready.
  absl::Status Start();
  void KillDaemon(int sig);
  pid_t daemon_pid() const;             // 0 when no daemon runs
  pid_t agent_pid(size_t index) const;  // 0 when that agent does not run
  void StopAgent(size_t index);
  void SignalAgent(size_t index, int sig);                             // e.g. SIGSTOP / SIGCONT to cut an agent off
  std::optional<int> WaitAgent(size_t index, absl::Duration timeout);  // its exit status
  absl::Status WaitNodesReady(size_t count, absl::Duration timeout);

  Options& mutable_options() { return options_; }  // before Start()
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  const std::string& dir() const { return dir_.path(); }
  std::string InventoryPath(size_t index) const;
  pb::JobService::Stub& jobs() { return *jobs_; }
  pb::ClusterService::Stub& cluster() { return *cluster_; }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }

  // A spec for `python3 deploy/examples/train_ddp.py args...` marked with this cluster's run id.
  pb::JobSpec TrainSpec(int nnodes, int devices, std::vector<std::string> args) const;
  // A one-node, one-card spec running `script` under /bin/sh, marked with this cluster's run id.
  pb::JobSpec ShellSpec(const std::string& script) const;
  absl::StatusOr<pb::Job> Submit(const pb::JobSpec& spec);
  absl::StatusOr<pb::Job> Get(const std::string& id);
  // Polls until `done(job)` or the timeout; returns the last job seen.
  absl::StatusOr<pb::Job> WaitFor(const std::string& id, const std::function<bool(const pb::Job&)>& done,
                                  absl::Duration timeout);
  absl::StatusOr<pb::Job> WaitForState(const std::string& id, pb::JobState state, absl::Duration timeout);
  absl::StatusOr<std::string> Logs(const std::string& id, std::optional<int> rank = std::nullopt);
  // Live (non-zombie) processes whose environment carries this cluster's run marker and job id.
  std::vector<pid_t> JobProcesses(const std::string& job_id) const;
  // Waits until the job has at least `count` live processes; returns them (fewer on timeout).
  std::vector<pid_t> WaitForJobProcesses(const std::string& job_id, size_t count, absl::Duration timeout) const;
  std::string DaemonLog() const;
  std::string AgentLog(size_t index) const;

  // Runs hetpoolctl against this cluster; returns its exit code, stdout+stderr in *output. With TLS
  // it gets the CA and the admin token (a later --token in `args` wins).
  int RunCli(const std::vector<std::string>& args, std::string* output) const;

  // With TLS: the PKI directory, a new token (hetpoolctl admin token), and a channel as the
  // holder of `token` (empty: no token, only TLS).
  std::string PkiDir() const { return dir() + "/pki"; }
  std::string TokenFile() const { return dir() + "/tokens.json"; }
  absl::StatusOr<std::string> AddToken(const std::string& user, const std::string& group,
                                       const std::string& role) const;
  std::shared_ptr<grpc::Channel> ChannelAs(const std::string& token, const std::string& cert_name = "") const;

 private:
  void Connect();
  absl::Status MakePki();

  Options options_;
  std::string admin_token_;
  TempDir dir_;
  int port_ = 0;
  int rdzv_base_ = 0;
  std::unique_ptr<ChildProcess> daemon_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::ClusterService::Stub> cluster_;
};

// A test suite sharing one example-pool cluster (ExamplePool) across its tests.
class ExamplePoolSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  static TestCluster* cluster_;
};

}  // namespace hetpool::testing
