#include "src/daemon/state/node_view_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "drivers/backend_factory.h"
#include "spdlog/spdlog.h"
#include "src/daemon/state/claim_ledger.h"

namespace hetpool::daemon {
namespace {

// What a node's view reads of its claims, as text: two claim sets with the same signature hold
// the same devices, shares and host resources.
std::string ClaimsSignature(const Claims& claims) {
  std::string out;
  for (const auto& [key, claim] : claims) {
    absl::StrAppend(&out, key.first, "/", key.second, ":", claim.device_milli, ",", claim.device_memory_mib, ",",
                    claim.cpu_milli, ",", claim.host_memory_mib);
    for (const std::string& id : claim.device_ids) absl::StrAppend(&out, ",", id);
    out.push_back(';');
  }
  return out;
}

}  // namespace

void MarkHeld(const HeldCards& held, scheduler::NodeView& view) {
  auto it = held.find(view.name);
  bool changed = false;
  for (auto& dv : view.devices) {
    const bool now_held = it != held.end() && it->second.contains(dv.device->id);
    changed = changed || dv.held != now_held;
    dv.held = now_held;
  }
  if (changed) view.generation = scheduler::ContentGeneration(view);
}

scheduler::NodeView* ViewNamed(std::vector<scheduler::NodeView>& views, const std::string& name) {
  auto it = std::lower_bound(views.begin(), views.end(), name,
                             [](const scheduler::NodeView& v, const std::string& n) { return v.name < n; });
  return it == views.end() || it->name != name ? nullptr : &*it;
}

template <typename F>
void NodeViewCache::ForEachCurrent(bool all_free, F&& f) const {
  std::map<std::string, CachedView>& cache = all_free ? free_views_ : held_views_;
  auto cached = cache.begin();
  size_t index = 0;
  for (const auto& [name, node] : nodes_.entries()) {
    while (cached != cache.end() && cached->first < name) cached = cache.erase(cached);  // a node gone
    if (cached == cache.end() || cached->first != name) cached = cache.emplace_hint(cached, name, CachedView{});
    Current(cached->second, node, all_free);
    f(index++, node, cached->second);
    ++cached;
  }
  cache.erase(cached, cache.end());
}

std::vector<scheduler::NodeView> NodeViewCache::Views(bool all_free) const {
  std::vector<scheduler::NodeView> views;
  views.reserve(nodes_.entries().size());
  ForEachCurrent(all_free, [&](size_t, const NodeEntry&, const CachedView& cached) { views.push_back(cached.view); });
  return views;
}

void NodeViewCache::UpdateSlots() {
  if (slots_.size() == nodes_.entries().size() && slots_nodes_added_ == nodes_.nodes_added()) return;
  slots_.clear();
  slot_of_.clear();
  ForEachCurrent(false, [&](size_t index, const NodeEntry& node, CachedView& cached) {
    // The cache's entries are map nodes: their addresses hold until the node is dropped.
    slots_.push_back({&node, &cached});
    slot_of_.emplace(&node, index);
  });
  slots_nodes_added_ = nodes_.nodes_added();
  ++slots_version_;
}

bool NodeViewCache::SyncSlot(std::vector<scheduler::NodeView>& views, size_t i) {
  const Slot& slot = slots_[i];
  // An entry copied from the cached view as it is now (same build: its devices point into the
  // same inventory) with the same generation (which held marks change too) is that view.
  const scheduler::NodeView& view = Current(*slot.cached, *slot.node, false);
  if (synced_builds_[i] == slot.cached->build && views[i].generation == view.generation) return false;
  views[i] = view;
  synced_builds_[i] = slot.cached->build;
  synced_generations_[i] = view.generation;
  return true;
}

void NodeViewCache::Sync(std::vector<scheduler::NodeView>& views) {
  UpdateSlots();
  const std::vector<NodeEntry*> changed = nodes_.TakeViewChanges(reader_);
  const bool check_every_node = ++syncs_ % kCheckEverySyncs == 0 || reader_ < 0;
  // Only the vector the last Sync left (moved around, it keeps its buffer) is synced in place.
  if (synced_version_ == slots_version_ && synced_data_ == views.data() && views.size() == slots_.size() &&
      synced_builds_.size() == views.size()) {
    for (const NodeEntry* node : changed) {
      if (auto it = slot_of_.find(node); it != slot_of_.end()) SyncSlot(views, it->second);
    }
    // What the caller changed since (held marks, a node refreshed after a placement) goes back to
    // the cached view; a contiguous read, unlike the nodes'.
    for (size_t i = 0; i < views.size(); ++i) {
      if (views[i].generation != synced_generations_[i]) SyncSlot(views, i);
    }
    if (check_every_node) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (!SyncSlot(views, i) || reader_ < 0) continue;
        ++unnoted_changes_;
        spdlog::error(
            "scheduler view of node {} changed without a note (NodeRegistry::NoteViewChange): a bug; "
            "its view is read again now",
            slots_[i].node->record.name());
      }
    }
    return;
  }
  views.clear();  // a node came, or the vector is not the one synced last: copy them all
  synced_builds_.clear();
  synced_generations_.clear();
  for (const Slot& slot : slots_) {
    const scheduler::NodeView& view = Current(*slot.cached, *slot.node, false);
    views.push_back(view);
    synced_builds_.push_back(slot.cached->build);
    synced_generations_.push_back(view.generation);
  }
  synced_version_ = slots_version_;
  synced_data_ = views.data();
}

scheduler::NodeView NodeViewCache::ViewOf(const NodeEntry& node, bool all_free, const std::set<JobGen>* without) const {
  if (without != nullptr && !all_free) return Build(node, all_free, without);
  return Current((all_free ? free_views_ : held_views_)[node.record.name()], node, all_free);
}

const scheduler::NodeView& NodeViewCache::Current(CachedView& cached, const NodeEntry& node, bool all_free) const {
  const bool schedulable = all_free || node.schedulable();
  bool current = !cached.view.name.empty() && cached.inventory_revision == node.inventory_revision &&
                 cached.schedulable == schedulable;
  // Claims untouched since they were last read are the same claims; touched ones may still be
  // (a heartbeat looks them up): compare what they hold before building the view again.
  if (!all_free && cached.claims_revision != node.claims.revision()) {
    std::string claims = ClaimsSignature(node.claims);
    current = current && claims == cached.claims;
    cached.claims = std::move(claims);
    cached.claims_revision = node.claims.revision();
  }
  if (!current) {
    cached.view = Build(node, all_free, nullptr);
    cached.build = ++builds_;
    cached.inventory_revision = node.inventory_revision;
    cached.schedulable = schedulable;
  }
  return cached.view;
}

scheduler::NodeView NodeViewCache::Build(const NodeEntry& node, bool all_free, const std::set<JobGen>* without) const {
  scheduler::NodeView view;
  view.name = node.record.name();
  view.schedulable = all_free || node.schedulable();
  static const Claims kNoClaims;
  const Claims* claims = all_free ? &kNoClaims : &node.claims;
  Claims kept;
  if (without != nullptr && !all_free) {
    for (const auto& [key, claim] : node.claims) {
      if (!without->contains(key)) kept.emplace(key, claim);
    }
    claims = &kept;
  }
  // Shares held per device: whole claims take all of it, fractional ones their slice.
  const Holds holds = HoldsByDevice(*claims);
  view.context.torch_devices = node.inventory.torch_devices.empty()
                                   ? drivers::DefaultTorchDevices(node.inventory.devices)
                                   : node.inventory.torch_devices;
  view.context.metax_cuda_translation = metax_cuda_translation_;
  view.context.collectives = node.inventory.collectives;
  view.container_runtime = node.inventory.container_runtime;
  view.images = &node.inventory.images;
  if (auto rack = node.record.labels().find("rack"); rack != node.record.labels().end()) view.rack = rack->second;
  const HostFree host = HostFreeOf(node.inventory, *claims);
  view.cpu_milli_total = host.cpu_milli_total;
  view.cpu_milli_free = host.cpu_milli;
  view.host_memory_total_mib = host.memory_total_mib;
  view.host_memory_free_mib = host.memory_mib;
  for (const auto& device : node.inventory.devices) {
    const DeviceFree free = FreeOf(device, HoldOn(holds, device.id));
    view.devices.push_back({&device, free.whole, free.milli, free.memory_mib});
  }
  view.generation = scheduler::ContentGeneration(view);  // the policy re-reads only changed nodes
  return view;
}

}  // namespace hetpool::daemon
