// Building blocks for the unit tests of ClusterState's parts (JobTable, NodeRegistry,
// AgentReconciler, SchedulingCycle): the parts wired together over an in-memory store with an
// injected clock, no lock and no thread, and the nodes and jobs they are fed.
#pragma once

#include <memory>
#include <string>

#include "gtest/gtest.h"

#include "drivers/fingerprint/fingerprint.h"
#include "drivers/fingerprint/spec_table.h"
#include "src/daemon/state/agent_reconciler.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"
#include "tests/testing/memory_store.h"

namespace hetpool::testing {

namespace pb = ::hetpool::v1;

// `cards` H100s as the agent's fingerprint pass reports them, on a 16-core host.
inline NodeInventory H100s(int cards) {
  NodeInventory inventory;
  inventory.cpus = 16;
  inventory.memory_mib = 65536;
  for (int i = 0; i < cards; ++i) {
    DeviceRecord d;
    d.id = "nvidia" + std::to_string(i);
    d.index = i;
    d.vendor = Vendor::kNvidia;
    d.model = "H100";
    d.memory_mib = 81920;
    d.capability.arch_major = 9;
    drivers::ApplyFingerprint(drivers::SpecTable::Defaults(), d);
    inventory.devices.push_back(d);
  }
  return inventory;
}

inline pb::RegisterRequest Registration(const std::string& node, const std::string& address = "127.0.0.1") {
  pb::RegisterRequest req;
  req.set_node_name(node);
  req.set_address(address);
  req.set_torchrun_path("/usr/bin/torchrun");
  req.set_work_dir("/tmp/" + node);
  return req;
}

inline pb::JobSpec TrainingSpec(int nnodes, int devices, int max_restarts = 0) {
  pb::JobSpec spec;
  spec.set_user("alice");
  spec.add_command("true");
  spec.set_working_dir("/tmp");
  spec.set_nnodes(nnodes);
  spec.set_devices_per_node(devices);
  spec.set_procs_per_node(devices > 0 ? devices : 1);
  spec.set_max_restarts(max_restarts);
  return spec;
}

// Counts the jobs offered to the scheduler (a pass over the queue offers every waiting job) and
// the passes.
class CountingObserver : public daemon::StateObserver {
 public:
  void Decision(const pb::Job&, absl::Duration, bool) override { ++decisions; }
  void StoreWrite(absl::Duration, bool) override {}
  void SchedulingPass(absl::Duration, bool full) override { ++(full ? full_passes : new_passes); }
  void JobEnded(const pb::Job&) override {}
  void JobRestarted(const pb::Job&, const std::string&) override {}
  int decisions = 0;
  int full_passes = 0, new_passes = 0;
};

// The job table and node registry over one in-memory store, with a clock the test moves. Jobs
// keep 3 events at most and nodes hand out rendezvous ports 29500-29502, so tests reach the ends.
struct StateParts {
  // `max_events`: the events a job keeps (the first and the newest).
  explicit StateParts(size_t max_events = 3)
      : jobs(&store, wakeups, daemon::JobTableOptions{max_events, [this] { return now; }, nullptr}),
        nodes(&store, wakeups, daemon::PortRange{29500, 29502}),
        reconciler(jobs, nodes, wakeups, daemon::LeaseOptions{}) {}

  // A job admitted as a submission would be (stored, PENDING).
  daemon::JobEntry& Submit(pb::JobSpec spec) {
    pb::Job job = jobs.NewJob(std::move(spec), "", nullptr);
    EXPECT_TRUE(daemon::WriteJobTimed(&store, nullptr, job).ok());
    return *jobs.Find(jobs.Admit(std::move(job)).id());
  }
  // Loads `stored` as hetpoold loads its store: written, read back as rows, decoded.
  void Load(const std::vector<pb::Job>& stored, uint64_t highest_seq) {
    std::vector<daemon::StoredRow> rows;
    for (const pb::Job& job : stored) rows.push_back({job.id(), job.SerializeAsString()});
    auto entries = daemon::DecodeStoredJobs(std::move(rows));
    ASSERT_TRUE(entries.ok()) << entries.status();
    jobs.Load(*std::move(entries), highest_seq);
  }
  daemon::NodeEntry& Register(const std::string& node, int cards) {
    return nodes.Register(Registration(node), H100s(cards), now);
  }
  // Drains or undrains `node` in memory alone (no store write, no wakeup), for a test's setup;
  // noted for the scheduling cycle's views as the registry's own changes are.
  void SetDrainedInMemory(daemon::NodeEntry& node, bool drained) {
    node.record.set_drained(drained);
    nodes.NoteViewChange(node);
  }
  void SetDrainedInMemory(const std::string& node, bool drained) { SetDrainedInMemory(*nodes.Find(node), drained); }

  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  MemoryStore store;
  daemon::Wakeups wakeups;
  daemon::JobTable jobs;
  daemon::NodeRegistry nodes;
  daemon::AgentReconciler reconciler;
};

}  // namespace hetpool::testing
