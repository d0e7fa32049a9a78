// A fleet of simulated nodes in one process, each with its own agent session against a real
// hetpoold over gRPC: Register, the order stream, heartbeats with the full process set, and
// re-registration when the daemon forgets the session (a restart). Jobs run as simulated
// processes: a launch order starts one, it "runs" for the seconds its plan's environment names
// (FLEET_SIM_DURATION_S; absent = until killed) and exits with code 0; a kill order ends it
// with 143. No torchrun, no devices: what the daemon sees is what 5,000 real agents would send.
//
// Used by tests/bench/fleet_scale.cc (issue 19); documented in docs/benchmarks.md ("Fleet scale").
// One thread reads every node's order stream (gRPC's async API on one completion queue); a few
// threads send heartbeats, each for a slice of the nodes, at once when a node's processes change
// and otherwise at the interval the daemon announced, sleeping in between: the simulator shares
// the daemon's machine, and every core it spins is one the daemon under test does not have.
// Heartbeats go out without waiting for their answers (gRPC's callback API), one at a time per
// node, as separate agents send them.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/security/credentials.h"
#include "hetpool/v1/agent.grpc.pb.h"

namespace hetpool::bench {

namespace pb = ::hetpool::v1;

// How a simulated process ends: after `runs`, with `exit_code`; a non-zero one reports
// `last_lines` as its failed rank's last lines (what the daemon reads for hardware signatures).
struct LaunchFate {
  absl::Duration runs = absl::InfiniteDuration();
  int exit_code = 0;
  int local_rank = 0;  // the rank that failed, reported with the lines
  std::vector<std::string> last_lines;
};

struct FleetOptions {
  std::string daemon;                                     // host:port
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: insecure
  int channels = 16;  // connections the nodes share (gRPC multiplexes streams on each)
  // Threads sending heartbeats and registrations, each for a slice of the nodes. 0: one per 40
  // nodes, 32 to 256. Heartbeats no longer wait for their answers; registrations do (one call
  // at a time per thread: with 32 threads for 5,000 nodes, when heartbeats waited too, a slice's
  // calls queued behind each other and a started job was reported 2.9 s late at p99).
  int heartbeat_threads = 0;
  // The bench's say over each launch on `node` (tests/bench/goodput.cc injects card faults and
  // checkpoints so). Unset: the process runs for its plan's FLEET_SIM_DURATION_S and exits 0.
  // Called with the node's lock held: it must not call back into the simulator.
  std::function<LaunchFate(const std::string& node, const pb::LaunchOrder& launch, absl::Time now)> fate;
};

struct SimNodeSpec {
  std::string name;
  pb::NodeInventory inventory;
};

// What happened to a launch, for the bench's latencies: when its order reached the node and
// when the daemon accepted the heartbeat that reported it running.
struct LaunchRecord {
  std::string job_id;
  uint64_t generation = 0;
  std::string node;
  absl::Time ordered;
  absl::Time reported_running;  // InfiniteFuture until then
};

// One node's inventory as the product's own discovery reads it: the sim backend over an
// inventory file (written in `dir`) of `cards` H100s on one NVSwitch, fingerprinted.
absl::StatusOr<pb::NodeInventory> TemplateInventory(int cards, const std::string& dir);
// A one-node training job of `cards` cards, "train.py" in /tmp, as the fleet's benches submit.
pb::JobSpec SimTrainingSpec(const std::string& name, const std::string& user, int cards);
// `count` nodes "sim-00000"... of that inventory, each card's UUID made unique.
std::vector<SimNodeSpec> FleetNodes(const pb::NodeInventory& base, int count);

class FleetSimulator {
 public:
  FleetSimulator(FleetOptions options, std::vector<SimNodeSpec> nodes);
  ~FleetSimulator();

  // Registers every node and opens its order stream; returns once all are registered or the
  // timeout passes (the error says how many are).
  absl::Status Start(absl::Duration timeout);
  // Closes every stream and stops the threads. Processes are dropped, not reported.
  void Stop();

  // Every launch seen so far (the first per job and generation).
  std::vector<LaunchRecord> Launches() const;
  // Simulated processes alive now, over all nodes.
  int RunningProcesses() const;
  // Sessions started after the first: re-registrations after a lost session.
  int Reregistrations() const { return reregistrations_.load(); }
  int Heartbeats() const { return heartbeats_.load(); }
  // Kill orders applied to a running simulated process: a daemon restart should cause none.
  int Kills() const { return kills_.load(); }
  int FailedCalls() const { return failed_calls_.load(); }

 private:
  struct Node;
  struct Process {
    uint64_t generation = 0;
    bool exited = false;
    int exit_code = 0;
    std::string message;
    absl::Time ends = absl::InfiniteFuture();
    LaunchFate fate;  // how it ends at `ends`
    std::vector<std::string> device_ids;
  };
  // A heartbeat thread sleeps until the next thing due in its slice (a heartbeat, a retry, a
  // simulated process's end); orders that change a node's processes wake it at once.
  struct Slice {
    absl::Mutex mu;
    absl::CondVar wake;
    bool kicked ABSL_GUARDED_BY(mu) = false;
  };
  void ReadLoop();
  void HeartbeatLoop(int slice);
  void Wake(Slice& slice);  // its thread looks at its nodes now
  bool RegisterNode(Node& node);
  void OpenStream(Node& node);
  void ApplyOrders(Node& node, const pb::Orders& orders);
  struct HeartbeatCall;
  // Sends the node's heartbeat without waiting for its answer (false: one is already on its way).
  bool SendHeartbeat(Node& node);
  void HeartbeatAnswered(Node& node, std::unique_ptr<HeartbeatCall> call, const grpc::Status& status);

  const FleetOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  int heartbeat_threads_ = 1;  // FleetOptions::heartbeat_threads, resolved
  std::vector<std::unique_ptr<pb::AgentService::Stub>> stubs_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Slice>> slices_;  // one per heartbeat thread
  grpc::CompletionQueue cq_;
  std::atomic<bool> stopping_{false};
  std::thread reader_;
  std::vector<std::thread> heartbeaters_;
  std::atomic<int> reregistrations_{0};
  std::atomic<int> heartbeats_{0};
  std::atomic<int> failed_calls_{0};
  std::atomic<int> kills_{0};
  absl::Mutex calls_mu_;
  int calls_in_flight_ ABSL_GUARDED_BY(calls_mu_) = 0;  // heartbeats sent, not yet answered
  mutable absl::Mutex launches_mu_;
  std::vector<LaunchRecord> launches_ ABSL_GUARDED_BY(launches_mu_);
  std::map<std::pair<std::string, uint64_t>, size_t> launch_index_ ABSL_GUARDED_BY(launches_mu_);
};

}  // namespace hetpool::bench
