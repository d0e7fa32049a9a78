// NodeViewCache: the node views the placement policy decides on (claim_ledger.h's one definition
// of free), each kept with what it was built from (the node's inventory revision, whether it
// takes work, its claims) and rebuilt only when that changed. A pass, and every submission's
// "can it ever fit" check, would otherwise rebuild (and hash) every node of a large pool each
// time. Thread-free: the scheduling cycle uses it under the state lock.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/placement_policy.h"
#include "src/daemon/state/node_registry.h"
#include "src/daemon/state/preemption_stage.h"

namespace hetpool::daemon {

class NodeViewCache {
 public:
  // `metax_cuda_translation`: a CUDA translation layer is installed on MetaX nodes (their views'
  // run context says so).
  NodeViewCache(NodeRegistry& nodes, bool metax_cuda_translation)
      : nodes_(nodes), metax_cuda_translation_(metax_cuda_translation), reader_(nodes.AddViewChangeReader()) {}
  ~NodeViewCache() { nodes_.RemoveViewChangeReader(reader_); }
  NodeViewCache(const NodeViewCache&) = delete;
  NodeViewCache& operator=(const NodeViewCache&) = delete;

  // Every node's current view, in name order, each with its ContentGeneration. `all_free`: as if
  // no claim held anything and every node took work (can a job ever fit?).
  std::vector<scheduler::NodeView> Views(bool all_free) const;

  // `views` (what the last Sync left, held marks and all) made every node's current view,
  // copying only the entries whose view changed; all of them when a node came, or when `views`
  // is another vector than the one the last Sync left. It reads the nodes the registry noted as
  // changed (NodeRegistry::TakeViewChanges) and the entries changed in `views` since, not every
  // node; every kCheckEverySyncs-th call reads every node as well, and logs any change it finds
  // that was not noted (a bug: a field changed without NoteViewChange). A cache the registry
  // has no reader left for reads every node each time.
  void Sync(std::vector<scheduler::NodeView>& views);
  static constexpr uint64_t kCheckEverySyncs = 1024;
  // Changes found that were not noted, since the start (what the check above logs).
  uint64_t unnoted_changes() const { return unnoted_changes_; }

  // The current view of `node`. `without`: the claims of those jobs left out (what the pool would
  // be if they stopped): built afresh, not kept.
  scheduler::NodeView ViewOf(const NodeEntry& node, bool all_free, const std::set<JobGen>* without = nullptr) const;

 private:
  struct CachedView {
    uint64_t inventory_revision = 0;
    bool schedulable = false;
    uint64_t claims_revision = 0;  // Claims::revision() when `claims` was last read
    std::string claims;            // ClaimsSignature of the claims it was built with
    scheduler::NodeView view;
    uint64_t build = 0;  // which build of a view this is (builds_ then): no two share one
  };

  // `cached` brought up to date with `node` (rebuilt only when what it was built from changed).
  const scheduler::NodeView& Current(CachedView& cached, const NodeEntry& node, bool all_free) const;
  scheduler::NodeView Build(const NodeEntry& node, bool all_free, const std::set<JobGen>* without) const;
  // Calls f(index, node, its CachedView brought up to date) for every node in name order,
  // dropping the cached views of nodes that are gone.
  template <typename F>
  void ForEachCurrent(bool all_free, F&& f) const;
  // Every node with its held view's cache entry, in name order: what Sync walks. Kept while no
  // node is added (NodeRegistry::nodes_added and the count say so): walking the registry's and
  // the cache's trees in step, node after node, was 40% of hetpoold's CPU at 5,000 nodes under
  // a stream of submissions (a pass each), every step a cache miss.
  struct Slot {
    const NodeEntry* node;
    CachedView* cached;
  };
  void UpdateSlots();
  // views[i] made slot i's current view (copied when it is another build or generation); true
  // when it was copied.
  bool SyncSlot(std::vector<scheduler::NodeView>& views, size_t i);

  NodeRegistry& nodes_;
  const bool metax_cuda_translation_;
  const int reader_;  // of the registry's view changes; -1: none
  mutable uint64_t builds_ = 0;
  // By node name, like NodeRegistry's nodes: ForEachCurrent walks both in step (a lookup per
  // node was a quarter of a pass at 5,000 nodes) and drops the views of nodes that are gone.
  mutable std::map<std::string, CachedView> held_views_, free_views_;
  // The build and generation of the cached view each entry of the last synced vector was copied
  // from: an entry whose generation differs was changed by the caller (held marks, a refresh).
  std::vector<uint64_t> synced_builds_;
  std::vector<uint64_t> synced_generations_;
  std::vector<Slot> slots_;
  std::unordered_map<const NodeEntry*, size_t> slot_of_;  // index in slots_
  uint64_t syncs_ = 0;
  uint64_t unnoted_changes_ = 0;
  uint64_t slots_nodes_added_ = 0;
  uint64_t slots_version_ = 0;                        // moves when slots_ is made again
  uint64_t synced_version_ = 0;                       // slots_version_ when the synced vector was last copied whole
  const scheduler::NodeView* synced_data_ = nullptr;  // that vector's buffer
};

// Marks the devices of `held` (node -> device ids) held on `view`, and only those: the
// Reservation filter keeps other jobs off them. The view's generation changes with its marks.
void MarkHeld(const HeldCards& held, scheduler::NodeView& view);

// The view of node `name` in `views` (in name order, as NodeViewCache makes them), or null.
scheduler::NodeView* ViewNamed(std::vector<scheduler::NodeView>& views, const std::string& name);

}  // namespace hetpool::daemon
