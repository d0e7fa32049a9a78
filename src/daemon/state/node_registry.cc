#include "src/daemon/state/node_registry.h"

#include <bit>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/store/parse_rows.h"

namespace hetpool::daemon {
namespace {

std::string NewSessionId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x%08x", rd(), rd(), rd());
}

// Whether two inventories differ only in what changes all the time (utilisation, memory in use).
// Compared field by field: serialised bytes of messages with maps are not deterministic.
bool SameLastingInventory(pb::NodeInventory a, pb::NodeInventory b) {
  for (auto* inv : {&a, &b}) {
    for (auto& d : *inv->mutable_devices()) {
      d.clear_utilization_percent();
      d.clear_memory_used_mib();
      d.clear_processes();  // who holds a card comes and goes with its jobs
      d.clear_dirty();
    }
  }
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// What makes a card of `inventory` dirty ("" when clean or unknown).
std::string DirtOf(const NodeInventory& inventory, const std::string& device_id) {
  for (const auto& d : inventory.devices) {
    if (d.id == device_id) return d.dirty;
  }
  return "";
}

// Moves the inventory of `stored_row` (a node's stored record, NodeEntry::stored_row) into
// `record`; false, leaving `record` as it is, when the row does not parse.
bool TakeStoredInventory(const std::string& stored_row, pb::Node& record) {
  pb::Node whole;
  if (!whole.ParseFromString(stored_row)) return false;
  record.mutable_inventory()->Swap(whole.mutable_inventory());
  return true;
}

// Parses a node's stored row back in for its reported inventory. The row parsed when it was
// loaded; should it not now, the inventory stays empty and the agent's next registration sets it.
void ParseStoredInventory(NodeEntry& node) {
  if (node.stored_row.empty()) return;
  if (!TakeStoredInventory(node.stored_row, node.record)) {
    spdlog::error("node {}: its stored row no longer parses; its inventory is empty until its agent registers",
                  node.record.name());
  }
  node.stored_row = std::string();
}

bool SameLabels(const google::protobuf::Map<std::string, std::string>& a,
                const google::protobuf::Map<std::string, std::string>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

NodeRegistry::NodeRegistry(Store* store, Wakeups& wakeups, PortRange rendezvous_ports)
    : store_(store), wakeups_(wakeups), ports_(rendezvous_ports) {}

absl::StatusOr<std::vector<StoredNode>> DecodeStoredNodes(std::vector<StoredRow> rows) {
  return DecodeRows<StoredNode>(std::move(rows), [](StoredRow& row, StoredNode& node) {
    if (!node.record.ParseFromString(row.bytes)) return RowDoesNotParse<pb::Node>("node row", row);
    node.inventory = FromProto(node.record.inventory());
    // Let go of the parsed cards at once: the next row's parse reuses their memory, where keeping
    // them would fault in fresh pages for every node (most of a start's time in a VM).
    node.record.clear_inventory();
    node.row = std::move(row.bytes);
    return absl::OkStatus();
  });
}

void NodeRegistry::Load(std::vector<StoredNode> stored, absl::Time now, absl::Time lease_from) {
  const uint64_t version_base = static_cast<uint64_t>(absl::ToUnixMicros(now));
  for (auto& [record, row, inventory] : stored) {
    if (!inventory.ok()) {
      spdlog::warn("stored node {} has an unusable inventory ({}); waiting for it to re-register", record.name(),
                   std::string(inventory.status().message()));
      inventory = NodeInventory{};
    }
    NodeEntry& node = Emplace(record.name());
    const std::string address = record.address();
    node.record = std::move(record);
    node.record.clear_address();
    SetAddress(node, address);
    node.stored_row = std::move(row);
    node.inventory = *std::move(inventory);
    MarkQuarantined(node);
    node.inventory_revision = ++last_inventory_revision_;
    node.ready = false;
    node.last_heartbeat = now;
    node.lease_renewed_at = lease_from;  // one lease of grace to re-register
    node.orders_version = version_base;
    NoteViewChange(node);
  }
  ++lasting_epoch_;
}

NodeEntry& NodeRegistry::Emplace(const std::string& name) {
  auto [it, added] = nodes_.try_emplace(name);
  NodeEntry& node = it->second;
  if (added) {
    ++nodes_added_;
    // A map's entries stay where they are: the hook's pointer holds as long as the node.
    node.claims.CallOnChange([this, &node] { NoteViewChange(node); });
  }
  return node;
}

void NodeRegistry::NoteViewChange(NodeEntry& node) {
  for (uint32_t missing = view_change_readers_ & ~node.view_change_noted; missing != 0; missing &= missing - 1) {
    view_changes_[std::countr_zero(missing)].push_back(&node);
  }
  node.view_change_noted |= view_change_readers_;
}

int NodeRegistry::AddViewChangeReader() {
  const uint32_t free = ~view_change_readers_;
  if (free == 0) return -1;
  const int reader = std::countr_zero(free);
  view_change_readers_ |= 1u << reader;
  return reader;
}

void NodeRegistry::RemoveViewChangeReader(int reader) {
  if (reader < 0 || reader >= kMaxViewChangeReaders) return;
  TakeViewChanges(reader);  // clears its bit on the nodes it had
  view_change_readers_ &= ~(1u << reader);
}

std::vector<NodeEntry*> NodeRegistry::TakeViewChanges(int reader) {
  if (reader < 0 || reader >= kMaxViewChangeReaders) return {};
  std::vector<NodeEntry*> taken;
  taken.swap(view_changes_[reader]);
  for (NodeEntry* node : taken) node->view_change_noted &= ~(1u << reader);
  return taken;
}

NodeEntry* NodeRegistry::Find(const std::string& name) {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

const NodeEntry* NodeRegistry::Find(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

NodeEntry& NodeRegistry::Register(const pb::RegisterRequest& req, NodeInventory inventory, absl::Time now,
                                  absl::Time lease_from) {
  const bool known = nodes_.contains(req.node_name());
  NodeEntry& node = Emplace(req.node_name());
  if (!known) {
    node.record.set_name(req.node_name());
    *node.record.mutable_registered_at() = ToProtoTime(now);
    node.orders_version = static_cast<uint64_t>(absl::ToUnixMicros(now));
  }
  ParseStoredInventory(node);
  // A node registering again as it was (a daemon restart, a lost session) needs no store write:
  // after a restart of a large pool every node registers within seconds, and a durable write
  // each would queue them all behind one fsync after another.
  const bool unchanged =
      known && node.record.address() == req.address() && node.record.torchrun_path() == req.torchrun_path() &&
      node.record.python_path() == req.python_path() && node.record.work_dir() == req.work_dir() &&
      SameLabels(node.record.labels(), req.labels()) && SameLastingInventory(node.record.inventory(), req.inventory());
  // A changed inventory replaces the old one; claims (running jobs) are left as they are.
  SetAddress(node, req.address());
  node.record.set_torchrun_path(req.torchrun_path());
  node.record.set_python_path(req.python_path());
  node.record.set_work_dir(req.work_dir());
  *node.record.mutable_labels() = req.labels();
  *node.record.mutable_inventory() = req.inventory();
  node.inventory = std::move(inventory);
  MarkQuarantined(node);
  node.inventory_revision = ++last_inventory_revision_;
  node.session_id = NewSessionId();
  node.ready = true;
  NoteViewChange(node);
  node.last_heartbeat = now;
  node.lease_renewed_at = lease_from;
  node.applied_version = 0;
  if (orders_listener_) orders_listener_(node.record.name());
  if (unchanged) return node;
  ++lasting_epoch_;
  if (auto s = store_->PutNode(node.record); !s.ok()) {
    spdlog::error("store write for node {} failed: {}", node.record.name(), std::string(s.message()));
  }
  return node;
}

absl::Status NodeRegistry::CheckSession(const std::string& node, const std::string& session) const {
  const NodeEntry* entry = Find(node);
  if (entry == nullptr || entry->session_id.empty() || entry->session_id != session) {
    return absl::NotFoundError(absl::StrCat("no live session ", session, " for node '", node, "'; register again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeEntry*> NodeRegistry::Session(const std::string& node, const std::string& session) {
  if (auto s = CheckSession(node, session); !s.ok()) return s;
  return Find(node);
}

void NodeRegistry::EndSession(NodeEntry& node) {
  node.session_id.clear();
  node.ready = false;
  NoteViewChange(node);
  if (orders_listener_) orders_listener_(node.record.name());
}

void NodeRegistry::BumpOrders(NodeEntry& node) {
  ++node.orders_version;
  if (orders_listener_) orders_listener_(node.record.name());
  wakeups_.Changed();
}

bool NodeRegistry::UpdateInventory(NodeEntry& node, const pb::NodeInventory& reported, NodeInventory parsed) {
  // Health, memory use and cards that vanished: running jobs are left alone, the scheduler
  // stops using unhealthy cards from the next cycle on.
  // A card turning dirty or clean is not stored (the agent says it again with every report) but
  // changes what can be placed: the scheduler looks again.
  bool dirt_changed = false;
  for (const auto& d : parsed.devices) {
    if (!d.healthy) spdlog::warn("node {}: {} unhealthy: {}", node.record.name(), d.id, d.health_message);
    if (DirtOf(node.inventory, d.id) == d.dirty) continue;
    dirt_changed = true;
    if (d.dirty.empty()) {
      spdlog::info("node {}: {} is clean again", node.record.name(), d.id);
    } else {
      spdlog::warn("node {}: {} dirty: {}", node.record.name(), d.id, d.dirty);
    }
  }
  if (dirt_changed) {
    wakeups_.CapacityChanged();
    wakeups_.Changed();
  }
  node.inventory = std::move(parsed);
  MarkQuarantined(node);
  node.inventory_revision = ++last_inventory_revision_;
  NoteViewChange(node);
  ParseStoredInventory(node);
  const bool lasting_change = !SameLastingInventory(node.record.inventory(), reported);
  *node.record.mutable_inventory() = reported;
  if (!lasting_change) return false;
  ++lasting_epoch_;
  if (auto s = store_->PutNode(node.record); !s.ok()) {
    spdlog::error("store write for node {} failed: {}", node.record.name(), std::string(s.message()));
  }
  wakeups_.CapacityChanged();
  wakeups_.Changed();
  return true;
}

void NodeRegistry::SetFault(NodeEntry& node, const std::string& fault) {
  if (node.record.fault() == fault) return;
  if (fault.empty()) {
    spdlog::info("node {}: its agent takes work again (was: {})", node.record.name(), node.record.fault());
    wakeups_.CapacityChanged();
  } else {
    spdlog::error("node {}: its agent takes no new work: {}", node.record.name(), fault);
  }
  node.record.set_fault(fault);
  NoteViewChange(node);
  wakeups_.Changed();
}

absl::Status NodeRegistry::StoreRecordOrUndo(NodeEntry& node, absl::string_view what,
                                             const std::function<void()>& undo) {
  if (auto s = store_->PutNode(node.record); !s.ok()) {
    undo();
    return absl::UnavailableError(absl::StrCat(what, " not stored: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status NodeRegistry::SetDrained(NodeEntry& node, bool drained, absl::string_view why) {
  if (node.record.drained() == drained) return absl::OkStatus();
  ParseStoredInventory(node);  // the record is written whole
  node.record.set_drained(drained);
  NoteViewChange(node);
  if (auto s = StoreRecordOrUndo(node, "node state", [&] { node.record.set_drained(!drained); }); !s.ok()) return s;
  spdlog::info("node {} {} {}", node.record.name(), drained ? "drained" : "undrained", std::string(why));
  wakeups_.CapacityChanged();
  wakeups_.Changed();
  return absl::OkStatus();
}

void NodeRegistry::MarkQuarantined(NodeEntry& node) {
  for (const pb::CardQuarantine& q : node.record.quarantined_cards()) {
    for (DeviceRecord& d : node.inventory.devices) {
      if (d.id != q.device_id()) continue;
      d.healthy = false;
      d.health_message = absl::StrCat("quarantined: ", q.reason());
    }
  }
}

absl::Status NodeRegistry::Quarantine(NodeEntry& node, pb::CardQuarantine quarantine) {
  for (const pb::CardQuarantine& q : node.record.quarantined_cards()) {
    if (q.device_id() == quarantine.device_id()) return absl::OkStatus();
  }
  ParseStoredInventory(node);  // the record is written whole
  *node.record.add_quarantined_cards() = quarantine;
  if (auto s = StoreRecordOrUndo(node, "quarantine", [&] { node.record.mutable_quarantined_cards()->RemoveLast(); });
      !s.ok()) {
    return s;
  }
  MarkQuarantined(node);
  node.inventory_revision = ++last_inventory_revision_;
  NoteViewChange(node);
  spdlog::error("node {}: card {} quarantined: {}", node.record.name(), quarantine.device_id(), quarantine.reason());
  wakeups_.CapacityChanged();
  wakeups_.Changed();
  return absl::OkStatus();
}

absl::Status NodeRegistry::QuarantineNode(NodeEntry& node, pb::CardQuarantine quarantine) {
  if (node.record.has_quarantine()) return absl::OkStatus();
  ParseStoredInventory(node);
  *node.record.mutable_quarantine() = std::move(quarantine);
  if (auto s = StoreRecordOrUndo(node, "node quarantine", [&] { node.record.clear_quarantine(); }); !s.ok()) return s;
  NoteViewChange(node);
  spdlog::error("node {} quarantined: {}", node.record.name(), node.record.quarantine().reason());
  wakeups_.CapacityChanged();
  wakeups_.Changed();
  return absl::OkStatus();
}

absl::Status NodeRegistry::ReturnNode(NodeEntry& node) {
  if (!node.record.has_quarantine()) {
    return absl::NotFoundError(absl::StrCat("node ", node.record.name(), " is not quarantined"));
  }
  ParseStoredInventory(node);
  const pb::CardQuarantine kept = node.record.quarantine();
  node.record.clear_quarantine();
  if (auto s = StoreRecordOrUndo(node, "node return", [&] { *node.record.mutable_quarantine() = kept; }); !s.ok()) {
    return s;
  }
  NoteViewChange(node);
  wakeups_.CapacityChanged();
  wakeups_.Changed();
  return absl::OkStatus();
}

absl::Status NodeRegistry::ReturnCard(NodeEntry& node, const std::string& device_id) {
  auto* cards = node.record.mutable_quarantined_cards();
  auto it = std::find_if(cards->begin(), cards->end(),
                         [&](const pb::CardQuarantine& q) { return q.device_id() == device_id; });
  if (it == cards->end()) {
    return absl::NotFoundError(
        absl::StrCat("card ", device_id, " of node ", node.record.name(), " is not quarantined"));
  }
  ParseStoredInventory(node);
  const pb::CardQuarantine kept = *it;
  cards->erase(it);
  if (auto s = StoreRecordOrUndo(node, "card return", [&] { *cards->Add() = kept; }); !s.ok()) return s;
  // As its agent last reported it (the record keeps the report; the quarantine only overlaid
  // it), or, with no report of the card kept, healthy.
  for (DeviceRecord& d : node.inventory.devices) {
    if (d.id != device_id) continue;
    d.healthy = true;
    d.health_message.clear();
    for (const pb::Device& reported : node.record.inventory().devices()) {
      if (reported.id() != device_id) continue;
      d.healthy = reported.healthy();
      d.health_message = reported.health_message();
    }
  }
  node.inventory_revision = ++last_inventory_revision_;
  NoteViewChange(node);
  spdlog::info("node {}: card {} returned to service", node.record.name(), device_id);
  wakeups_.CapacityChanged();
  wakeups_.Changed();
  return absl::OkStatus();
}

void NodeRegistry::SetAddress(NodeEntry& node, const std::string& address) {
  const std::string& name = node.record.name();
  if (auto old = names_at_address_.find(node.record.address()); old != names_at_address_.end()) {
    old->second.erase(name);
    if (old->second.empty()) names_at_address_.erase(old);
  }
  node.record.set_address(address);
  names_at_address_[address].insert(name);
}

void NodeRegistry::NoteForeignPort(const std::string& endpoint, absl::Time now) {
  const auto colon = endpoint.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(endpoint.substr(colon + 1), &port)) return;
  foreign_ports_[endpoint.substr(0, colon)][port] = now;
}

absl::StatusOr<int> NodeRegistry::PickRendezvousPort(const std::string& address, absl::Time now) {
  std::set<int> used;
  if (auto foreign = foreign_ports_.find(address); foreign != foreign_ports_.end()) {
    std::erase_if(foreign->second, [&](const auto& noted) { return now - noted.second >= kForeignPortMemory; });
    for (const auto& [port, at] : foreign->second) used.insert(port);
  }
  auto note = [&](const std::string& endpoint) {
    const auto colon = endpoint.rfind(':');
    int port = 0;
    if (colon != std::string::npos && endpoint.substr(0, colon) == address &&
        absl::SimpleAtoi(endpoint.substr(colon + 1), &port)) {
      used.insert(port);
    }
  };
  // The port is held by rank 0's torchrun, so the claims on the nodes at this address tell which
  // are busy: every generation whose rank 0 runs there, also one being stopped (the claim stays
  // until the agent no longer reports its processes). Several agents may share a host. Only
  // those nodes' claims are read: scanning every job made each gang placement cost O(jobs).
  if (auto at = names_at_address_.find(address); at != names_at_address_.end()) {
    for (const std::string& name : at->second) {
      for (const auto& [key, claim] : nodes_.at(name).claims) note(claim.rendezvous_endpoint);
    }
  }
  const int span = ports_.max - ports_.min + 1;
  int& cursor = next_port_[address];
  for (int i = 0; i < span; ++i) {
    const int port = ports_.min + (cursor + i) % span;
    if (used.contains(port)) continue;
    cursor = (cursor + i + 1) % span;
    return port;
  }
  return absl::ResourceExhaustedError(absl::StrCat("no free rendezvous port on ", address, " (--rdzv-port-range ",
                                                   ports_.min, "-", ports_.max, ": ", used.size(),
                                                   " held by running jobs or found in use by other processes)"));
}

pb::Node NodeRegistry::Snapshot(const NodeEntry& node) {
  pb::Node out = node.record;
  if (!node.stored_row.empty()) TakeStoredInventory(node.stored_row, out);  // parsed at load: it parses
  out.set_state(node.ready ? pb::NODE_STATE_READY : pb::NODE_STATE_NOT_READY);
  *out.mutable_last_heartbeat() = ToProtoTime(node.last_heartbeat);
  for (const auto& [key, claim] : node.claims) {
    if (claim.desired) out.add_running_jobs(key.first);
  }
  return out;
}

std::set<std::string> ForEachKeptClaim(
    const NodeRegistry& nodes,
    absl::FunctionRef<void(const std::string&, const NodeEntry&, const JobGen&, const Claim&)> fn) {
  std::set<std::string> stopping;
  for (const auto& [name, node] : nodes.entries()) {
    for (const auto& [key, claim] : node.claims) {
      if (claim.desired) {
        fn(name, node, key, claim);
      } else {
        stopping.insert(key.first);
      }
    }
  }
  return stopping;
}

}  // namespace hetpool::daemon
