// AgentReconciler: what the agents' reports and silences do to jobs and claims. A process that
// exited ends its node's part of the gang (success, or a restart / failure of the whole gang); a
// process the daemon did not order is ordered stopped; a claim the agent no longer runs is
// released; a node silent past its lease and orphan grace loses its jobs. It also writes each
// node's orders (launches and kills) from the claims. Thread-free: ClusterState calls it under
// its lock, with the clock it was given.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hetpool/v1/agent.pb.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/card_suspicion.h"
#include "src/daemon/state/hardware_signatures.h"
#include "src/daemon/state/node_registry.h"
#include "src/daemon/state/wakeups.h"

namespace hetpool::daemon {

struct LeaseOptions {
  absl::Duration lease_ttl = absl::Seconds(10);
  // How long a node past its lease keeps its jobs before they are restarted elsewhere (the
  // agent keeps them running that long without a daemon, and fences them then).
  absl::Duration orphan_grace = absl::Minutes(10);
};

class AgentReconciler {
 public:
  AgentReconciler(JobTable& jobs, NodeRegistry& nodes, Wakeups& wakeups, LeaseOptions leases,
                  HardwareFaultOptions hardware = {});

  // What the agent says runs on `node` (on registration: everything it still runs). A report
  // whose change the store refuses is not applied: the agent reports it again.
  void ApplyProcessReports(NodeEntry& node, const google::protobuf::RepeatedPtrField<pb::ProcessStatus>& reports,
                           bool registering);
  // Nodes silent past the lease become NotReady; past the orphan grace too, their jobs are
  // restarted elsewhere or fail. Returns when the next lease or grace can lapse at the earliest
  // (a heartbeat only moves a node's later; a registration's comes a lease after it):
  // InfiniteFuture when no node has one to lapse. `now` and the answer are on the monotonic
  // clock, as each node's lease_renewed_at is.
  absl::Time ExpireLeases(absl::Time now);
  // Orders every node running a claim of the job's current generation to stop it, with `reason`,
  // SIGKILL following SIGTERM after `grace` (zero: the agent's --kill-grace).
  void ReleaseClaims(JobEntry& entry, const std::string& reason, absl::Duration grace = absl::ZeroDuration());
  // Stops the job's running generation to make room for another job (or, with
  // preemption.defragmentation, to move it): back to PENDING without spending a restart,
  // `preemption` recorded (the next generation sees HETPOOL_PREEMPTED=1), its processes given
  // the job's preemption_grace. The claims stay, holding the cards, until the
  // agents report the processes gone. Nothing changes when the store refuses the change.
  absl::Status Preempt(JobEntry& entry, pb::Preemption preemption);
  // Stops an elastic job's running generation to run it again at resize.to_nodes (grown into
  // free cards, or shrunk for resize.by_job): like a preemption, but counted in resize_count and
  // last_resize (the next generation sees HETPOOL_RESIZED=1).
  absl::Status Resize(JobEntry& entry, pb::Preemption resize);
  // The node's cards that raised a fatal health signal (device.h) are quarantined at once, and
  // the jobs running on them requeued elsewhere as after a hardware failure.
  void ActOnFatalSignals(NodeEntry& node);
  // With HardwareFaultOptions::return_cleared_cards: the node's cards quarantined for a fatal
  // signal that its agent now reports healthy and clear go back into service (logged for audit).
  void ReturnClearedCards(NodeEntry& node);
  // The node's orders: launches of its desired claims, kills of the others.
  pb::Orders OrdersFor(const NodeEntry& node) const;
  // Whether `node` may push logs of (job, generation): only a node the generation ran on.
  absl::Status CheckLogPush(const NodeEntry& node, const std::string& job_id, uint64_t generation) const;

 private:
  // A rank failed or a node was lost: restart the gang if restarts remain (and `origin` is not a
  // launch the job itself made impossible), else FAILED. `job` is the entry's next state so far.
  // Claims are released once the change is stored.
  absl::Status FailOrRestart(JobEntry& entry, pb::Job job, const std::string& reason, const std::string& message,
                             pb::FailureOrigin origin, bool restartable = true);
  // `job` (the entry's next state) back to PENDING with `reason`, stored; then its processes are
  // ordered stopped (`kill_reason`) with `grace` (0: the agent's --kill-grace).
  absl::Status StopGeneration(JobEntry& entry, pb::Job job, const char* reason, const std::string& message,
                              const std::string& kill_reason, absl::Duration grace = absl::ZeroDuration());
  // A launch refused because another process listens on its rendezvous port (the agent's
  // RendezvousPortTaken): requeued on another port, or failed as the pool's when none is left.
  absl::Status OnRendezvousPortTaken(JobEntry& entry, hetpool::v1::Job job, const std::string& node,
                                     const std::string& message);
  // A rank failed with a hardware signature (hardware_signatures.h): the infrastructure's failure.
  // The job is requeued at once without spending max_restarts, its later generations kept off the
  // cards it failed on, up to --max-hardware-requeues (then FAILED, "hardware suspected on N
  // cards"); the cards are suspected (card_suspicion.h) and quarantined past the rule.
  absl::Status OnHardwareFailure(JobEntry& entry, pb::Job job, const std::string& node,
                                 const HardwareEvidence& evidence);
  // The requeue itself: `job`'s generation ended by the hardware (`what`, `line`) on `device_ids`
  // of `node` (the suspect cards, none for a node-wide cause), which its next generations avoid;
  // FAILED past the requeue bound.
  absl::Status RequeueForHardware(JobEntry& entry, pb::Job job, const std::string& node,
                                  const std::vector<std::string>& device_ids, const std::string& what,
                                  const std::string& line);
  // Notes the failure against each card; quarantines those now past the rule (events on `job`).
  // `how` they failed, for the quarantine's reason ("with a hardware signature").
  void SuspectCards(pb::Job& job, const std::string& node, const std::vector<std::string>& device_ids,
                    const std::string& evidence, absl::string_view how = "with a hardware signature", int needed = 0);
  // Notes a node-wide failure (its network) against the node; quarantines it past the rule.
  void SuspectNode(pb::Job& job, const std::string& node, const std::string& evidence);
  // Quarantines the node once HardwareFaultOptions::quarantine_node_after_cards of its cards are.
  void QuarantineNodeOfManyCards(NodeEntry& node);
  // A generation of `job` failed as its own on `node` (its failure set): within
  // HardwareFaultOptions::early_failure of its start, it is kept against the failed rank's card,
  // which the job's later generations are offered last (Job.shunned_cards).
  void NoteEarlyFailure(pb::Job& job, const std::string& node);
  // Once `job` runs past the early window (or succeeds) on other cards, its early failures count
  // against the cards they were on (events on `job`); true when any did.
  bool VindicateEarlyFailures(pb::Job& job);
  // A node's torchrun exited (or never started): success, or which rank failed and how.
  absl::Status OnNodeExited(JobEntry& entry, const std::string& node, const pb::ProcessStatus& report);
  // A running report: the node started (and, with every node started, the job runs).
  void OnNodeRunning(JobEntry& entry, const std::string& node, const pb::ProcessStatus& report);
  // The agent holds the launch back (NodeWaiting, once per reason).
  void OnNodeWaiting(JobEntry& entry, const std::string& node, const pb::ProcessStatus& report);
  // Claims the agent did not report: released once it acted on their kill, and a launch it acted
  // on but no longer runs fails the gang.
  void ForgetUnreported(NodeEntry& node, const std::set<JobGen>& reported, bool registering);

  JobTable& jobs_;
  NodeRegistry& nodes_;
  Wakeups& wakeups_;
  const LeaseOptions leases_;
  CardSuspicion suspicion_;
};

}  // namespace hetpool::daemon
