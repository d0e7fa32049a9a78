// What jobs hold of a node's devices and host (claims), and the one definition of "free" that
// every view of the pool uses: the scheduler's node views, `devices`, `fingerprints`, the planner's pool
// and the metrics snapshot. No lock and no clock: ClusterState owns the claims and its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "hetpool/device.h"

namespace hetpool::daemon {

// A job generation: (job id, generation).
using JobGen = std::pair<std::string, uint64_t>;

// One generation's hold on one node.
struct Claim {
  std::vector<std::string> device_ids;
  int32_t device_milli = 1000;     // share held on each device (fractional jobs < 1000)
  uint64_t device_memory_mib = 0;  // memory held on each device (0 with whole devices: all of it)
  int64_t cpu_milli = 0;           // host CPU held on the node (JobSpec.host)
  uint64_t host_memory_mib = 0;    // host memory held on the node
  bool desired = true;
  std::string kill_reason;
  absl::Duration kill_grace;          // SIGTERM to SIGKILL (a preemption's); zero: the agent's own
  uint64_t created_at_version = 0;    // orders version that first carried the launch
  uint64_t undesired_at_version = 0;  // orders version that first carried the kill
  // The generation's rendezvous host:port ("" for one-node jobs): busy until the claim goes,
  // that is until the agent no longer reports the generation's processes.
  std::string rendezvous_endpoint;
};

// The claims on one node, by generation. Every access that may change one (any non-const one)
// moves revision(), to a number no Claims has had: a scheduling pass skips reading the claims of
// a node whose revision it has seen (at 5,000 nodes, reading every node's claims was a third of
// each pass), and reads them when it moved to learn whether anything really changed.
class Claims {
 public:
  using Map = std::map<JobGen, Claim>;
  using iterator = Map::iterator;
  using const_iterator = Map::const_iterator;

  Claims() = default;
  // A node's claims are its own: a copy would carry the node's change hook to other claims.
  Claims(const Claims&) = delete;
  Claims& operator=(const Claims&) = delete;

  // `on_change` is called at every access that may change the claims, as revision() moves: the
  // registry notes the node for the next scheduling pass (NodeRegistry::NoteViewChange).
  void CallOnChange(std::function<void()> on_change) { on_change_ = std::move(on_change); }

  const_iterator begin() const { return map_.begin(); }
  const_iterator end() const { return map_.end(); }
  const_iterator find(const JobGen& key) const { return map_.find(key); }
  bool contains(const JobGen& key) const { return map_.contains(key); }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }

  iterator begin() { return Changing().begin(); }
  iterator end() { return map_.end(); }
  iterator find(const JobGen& key) { return Changing().find(key); }
  Claim& operator[](const JobGen& key) { return Changing()[key]; }
  iterator erase(iterator it) { return Changing().erase(it); }
  size_t erase(const JobGen& key) { return Changing().erase(key); }
  template <typename... Args>
  std::pair<iterator, bool> emplace(Args&&... args) {
    return Changing().emplace(std::forward<Args>(args)...);
  }
  template <typename Predicate>
  size_t EraseIf(Predicate predicate) {
    return std::erase_if(Changing(), predicate);
  }

  uint64_t revision() const { return revision_; }

 private:
  Map& Changing();

  Map map_;
  uint64_t revision_ = 0;
  std::function<void()> on_change_;
};

// What the claims on a node hold of one device. Claims being stopped still hold theirs: their
// processes may still use the card.
struct DeviceHold {
  std::vector<std::string> jobs;       // in claim order, each once
  int32_t milli = 0;                   // sum of the shares (whole claims count 1000)
  uint64_t fractional_memory_mib = 0;  // memory held by fractional claims
  bool whole = false;                  // some claim holds the whole device
};
using Holds = std::map<std::string, DeviceHold>;  // by device id; a device nobody holds is absent

Holds HoldsByDevice(const Claims& claims);

// What is left of one device for new work (`hold` null: nobody holds any of it).
struct DeviceFree {
  bool whole = true;        // nothing held: a whole-card job may take it
  int32_t milli = 1000;     // share left for fractional jobs
  uint64_t memory_mib = 0;  // memory left for fractional jobs
};
DeviceFree FreeOf(const DeviceRecord& device, const DeviceHold* hold);

// What is held of one device, as `devices` and the metrics show it: at most the whole card.
struct DeviceAllocated {
  int32_t milli = 0;
  uint64_t memory_mib = 0;
};
DeviceAllocated AllocatedOf(const DeviceRecord& device, const DeviceHold* hold);

// Whether a new whole-card job could be given the device now: healthy, held by no process of
// another (DeviceRecord::dirty), nothing claimed, and on a
// node that takes work (Ready, not drained). The free counts of `fingerprints` and the planner.
bool GivableWhole(const DeviceRecord& device, const DeviceHold* hold, bool node_schedulable);

// What is left of the node's host CPU and memory after its claims. A node whose inventory reports
// no total (0) is not limited: it stays 0 here, and the HostResources filter ignores it.
struct HostFree {
  int64_t cpu_milli_total = 0;
  int64_t cpu_milli = 0;
  uint64_t memory_total_mib = 0;
  uint64_t memory_mib = 0;
};
HostFree HostFreeOf(const NodeInventory& inventory, const Claims& claims);

// The hold on `device_id` in `holds`, or null.
const DeviceHold* HoldOn(const Holds& holds, const std::string& device_id);

}  // namespace hetpool::daemon
