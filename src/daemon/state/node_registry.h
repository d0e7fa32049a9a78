// NodeRegistry: every node that registered, with its agent session and lease, the version of the
// orders it should follow, its inventory and the claims jobs hold on it (claim_ledger.h), and the
// rendezvous ports its address hands out. Node records are written to the Store. Thread-free:
// ClusterState calls it under its lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hetpool/device.h"
#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/cluster.pb.h"
#include "src/daemon/state/claim_ledger.h"
#include "src/daemon/state/wakeups.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

struct NodeEntry {
  // Persisted fields: name, address, inventory (in stored_row until parsed back), drained,
  // torchrun, work_dir.
  pb::Node record;
  // A node read from the store, until its agent registers again: the stored row, whose
  // inventory `record` leaves out. The registry parses it back in when the reported inventory
  // is needed (a registration or heartbeat compares with it, a drain writes it); ListNodes
  // parses it into its copy. A start of 5,000 nodes otherwise kept every card twice, as parsed
  // protobuf and converted below, and parsing the first was half the start's time.
  std::string stored_row;
  NodeInventory inventory;
  // Set, unique across the registry's life, whenever `inventory` or `record` is replaced (the
  // scheduling cycle reuses a node's view while it and the claims are unchanged).
  uint64_t inventory_revision = 0;
  std::string session_id;
  bool ready = false;
  absl::Time last_heartbeat;     // wall time, shown to people
  absl::Time lease_renewed_at;   // the same moment on the monotonic clock: what the lease runs on
  uint64_t orders_version = 0;   // bumped whenever what the node should run changes
  uint64_t applied_version = 0;  // the orders version the agent last said it acted on
  Claims claims;
  // A bit for each reader of view changes whose list holds the node (NodeRegistry::NoteViewChange).
  uint32_t view_change_noted = 0;

  // record.fault: the agent's report that it cannot start jobs safely (HeartbeatRequest.fault),
  // set anew by every registration and heartbeat.
  bool schedulable() const { return ready && !record.drained() && record.fault().empty() && !record.has_quarantine(); }
};

// A stored node as a start reads it: its record without the inventory, its stored row, and its
// inventory converted for the scheduler (or why it cannot be), all done on the decoding threads
// before the state lock is taken.
struct StoredNode {
  pb::Node record;
  std::string row;
  absl::StatusOr<NodeInventory> inventory;
};
// The rows of Store::LoadNodeRows, decoded on several threads; DATA_LOSS naming the first row
// that is not a node.
absl::StatusOr<std::vector<StoredNode>> DecodeStoredNodes(std::vector<StoredRow> rows);

struct PortRange {
  int min = 29500;
  int max = 30499;
};

// Hears, under the state lock, that a node's orders version or agent session changed: the order
// streams (services/order_streams.h) then send the node its orders or end a stale session's
// stream. It must only take note; calling back into the state would deadlock.
using OrdersListener = std::function<void(const std::string& node)>;

class NodeRegistry {
 public:
  NodeRegistry(Store* store, Wakeups& wakeups, PortRange rendezvous_ports);
  // Its nodes' claims call back into it (NoteViewChange): it stays where it was made.
  NodeRegistry(const NodeRegistry&) = delete;
  NodeRegistry& operator=(const NodeRegistry&) = delete;

  // Every change of a node's orders version (BumpOrders) or session (Register, EndSession) is
  // told to `listener` from then on.
  void WatchOrders(OrdersListener listener) { orders_listener_ = std::move(listener); }

  // The stored nodes (DecodeStoredNodes), NotReady with one lease of grace from `lease_from`
  // (the monotonic clock's now) to register again. Orders versions start at `now` (wall time) in
  // microseconds, above anything an earlier daemon handed out. Without `lease_from`: `now`.
  void Load(std::vector<StoredNode> stored, absl::Time now, absl::Time lease_from);
  void Load(std::vector<StoredNode> stored, absl::Time now) { Load(std::move(stored), now, now); }

  NodeEntry* Find(const std::string& name);
  const NodeEntry* Find(const std::string& name) const;
  std::map<std::string, NodeEntry>& entries() { return nodes_; }
  const std::map<std::string, NodeEntry>& entries() const { return nodes_; }
  bool empty() const { return nodes_.empty(); }
  // Moves whenever a node comes or a node's lasting inventory, labels or record change: what the
  // pool could ever hold is unchanged while it stays (SchedulingCycle::EverFits remembers it).
  uint64_t lasting_epoch() const { return lasting_epoch_; }
  // Moves whenever a node is added (nodes are never removed): with the count of entries, what
  // says that pointers to them, in name order, still list every node.
  uint64_t nodes_added() const { return nodes_added_; }

  // Notes that what `node`'s scheduler view is built from may have changed: whether it takes
  // work (ready, drained, fault), its inventory or labels, its claims. A scheduling pass reads
  // again only the nodes noted since the last one (TakeViewChanges): reading all 5,000 nodes'
  // revisions each pass was 40% of the scheduling thread under a stream of submissions, a cache
  // miss a node. The registry's own changes and every change of a node's claims are noted
  // here; code that sets one of those fields of a NodeEntry directly must call this.
  void NoteViewChange(NodeEntry& node);
  // Readers of the notes, each with its own list: the scheduling cycle's views (tests run
  // several cycles on one registry). At most kMaxViewChangeReaders at once; AddViewChangeReader
  // returns -1 past that.
  static constexpr int kMaxViewChangeReaders = 32;
  int AddViewChangeReader();
  void RemoveViewChangeReader(int reader);
  // The nodes noted since `reader`'s last take (or since it was added), each once.
  std::vector<NodeEntry*> TakeViewChanges(int reader);

  // A registration (already validated): the node is created or updated, gets a new session and
  // is Ready. Its claims (running jobs) are left as they are. The record is stored; a failed
  // write is logged, and the agent's next registration writes it again.
  // `now` stamps it (wall time); its lease runs from `lease_from` (the monotonic clock's now;
  // without it, `now`).
  NodeEntry& Register(const pb::RegisterRequest& request, NodeInventory inventory, absl::Time now,
                      absl::Time lease_from);
  NodeEntry& Register(const pb::RegisterRequest& request, NodeInventory inventory, absl::Time now) {
    return Register(request, std::move(inventory), now, now);
  }
  // The node of a live session, or NOT_FOUND telling the agent to register again.
  absl::StatusOr<NodeEntry*> Session(const std::string& node, const std::string& session);
  absl::Status CheckSession(const std::string& node, const std::string& session) const;
  // The agent's session is over (its lease lapsed): the node is NotReady and its agent's calls are
  // refused until it registers again.
  void EndSession(NodeEntry& node);
  // The node's orders changed: its order stream sends them.
  void BumpOrders(NodeEntry& node);
  // A heartbeat's inventory. Utilisation and memory in use change on every refresh: they are
  // kept in memory only. A lasting change (cards, health, links, versions) is stored, and
  // returns true: it may change what can be placed.
  bool UpdateInventory(NodeEntry& node, const pb::NodeInventory& reported, NodeInventory parsed);
  // Drains or undrains, stored before it counts (on a failed write nothing changes).
  // The agent's fault as its latest registration or heartbeat reports it ("" when none).
  void SetFault(NodeEntry& node, const std::string& fault);
  absl::Status SetDrained(NodeEntry& node, bool drained, absl::string_view why);
  // Takes a card out of service, stored with the node before it counts: from then on the card
  // reads unhealthy ("quarantined: <reason>") to everything that places jobs. A card already
  // quarantined keeps its first record.
  absl::Status Quarantine(NodeEntry& node, pb::CardQuarantine quarantine);
  // The whole node, stored; nothing is placed on it until ReturnNode. A node already quarantined
  // keeps its first record.
  absl::Status QuarantineNode(NodeEntry& node, pb::CardQuarantine quarantine);
  absl::Status ReturnNode(NodeEntry& node);
  // An operator returns the card after repair. NOT_FOUND when it is not quarantined.
  absl::Status ReturnCard(NodeEntry& node, const std::string& device_id);
  // A port on `address` that no live or dying generation holds, nor another process was last
  // found listening on (NoteForeignPort), taken round-robin so that a port just let go of is the
  // last to be handed out again. RESOURCE_EXHAUSTED when none is left.
  absl::StatusOr<int> PickRendezvousPort(const std::string& address, absl::Time now);
  // An agent found `endpoint` ("address:port") in use by a process of no job: the port is not
  // handed out on that address for kForeignPortMemory (the process may go away).
  void NoteForeignPort(const std::string& endpoint, absl::Time now);
  static constexpr absl::Duration kForeignPortMemory = absl::Minutes(10);

  // The node as ListNodes shows it.
  static pb::Node Snapshot(const NodeEntry& node);

 private:
  // Marks the node's quarantined cards unhealthy in `node.inventory` (after each replacement of
  // it: an agent reports the card as it sees it, healthy).
  static void MarkQuarantined(NodeEntry& node);
  // Writes the node's record as the caller changed it (the record is written whole: the caller
  // parsed its inventory back first); when the store refuses, `undo` puts the change back and the
  // error says `what` was not stored.
  absl::Status StoreRecordOrUndo(NodeEntry& node, absl::string_view what, const std::function<void()>& undo);
  Store* const store_;
  Wakeups& wakeups_;
  const PortRange ports_;
  // A node of that name, added with its claims' change hook when new.
  NodeEntry& Emplace(const std::string& name);

  std::map<std::string, NodeEntry> nodes_;
  uint32_t view_change_readers_ = 0;  // a bit per reader added
  std::vector<NodeEntry*> view_changes_[kMaxViewChangeReaders];
  uint64_t last_inventory_revision_ = 0;
  uint64_t lasting_epoch_ = 0;
  uint64_t nodes_added_ = 0;
  std::map<std::string, int> next_port_;  // per address: offset into the port range
  // Per address: the ports other processes were found listening on, and when.
  std::map<std::string, std::map<int, absl::Time>> foreign_ports_;
  // The nodes at each address (several agents may share a host): what PickRendezvousPort reads,
  // instead of every node of the pool for each multi-node placement.
  std::map<std::string, std::set<std::string>> names_at_address_;
  void SetAddress(NodeEntry& node, const std::string& address);
  OrdersListener orders_listener_;
};

// Calls `fn` for every claim the daemon wants kept (not being stopped), with its node; returns
// the jobs any of whose claims is being stopped. What preemption and elastic resizes take for
// the running jobs: a job being stopped anywhere is neither stopped nor resized again.
std::set<std::string> ForEachKeptClaim(
    const NodeRegistry& nodes,
    absl::FunctionRef<void(const std::string&, const NodeEntry&, const JobGen&, const Claim&)> fn);

}  // namespace hetpool::daemon
