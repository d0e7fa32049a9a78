#include "src/daemon/state/pool_queries.h"

#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/fingerprint.h"
#include "src/common/convert.h"

namespace hetpool::daemon {

std::vector<pb::DeviceView> DeviceViews(const NodeRegistry& nodes, const std::string& node_name,
                                        const std::string& vendor) {
  std::vector<pb::DeviceView> out;
  for (const auto& [name, node] : nodes.entries()) {
    if (!node_name.empty() && name != node_name) continue;
    const Holds holds = HoldsByDevice(node.claims);
    for (const auto& device : node.inventory.devices) {
      if (!vendor.empty() && VendorName(device.vendor) != vendor) continue;
      pb::DeviceView view;
      view.set_node(name);
      *view.mutable_device() = ToProto(device);
      for (const pb::CardQuarantine& q : node.record.quarantined_cards()) {
        if (q.device_id() == device.id) *view.mutable_quarantine() = q;
      }
      if (const DeviceHold* hold = HoldOn(holds, device.id); hold != nullptr) {
        const DeviceAllocated allocated = AllocatedOf(device, hold);
        view.set_allocated_to(absl::StrJoin(hold->jobs, ","));
        view.set_allocated_milli(allocated.milli);
        view.set_allocated_memory_mib(allocated.memory_mib);
      }
      out.push_back(std::move(view));
    }
  }
  return out;
}

std::vector<pb::FingerprintClass> FingerprintClasses(const NodeRegistry& nodes) {
  std::map<std::string, pb::FingerprintClass> classes;
  std::map<std::string, std::set<std::string>> nodes_of;
  for (const auto& [name, node] : nodes.entries()) {
    const Holds holds = HoldsByDevice(node.claims);
    for (const auto& d : node.inventory.devices) {
      pb::FingerprintClass& c = classes[d.fingerprint];
      if (c.total() == 0) {
        c.set_fingerprint(d.fingerprint);
        c.set_label(drivers::FingerprintLabel(d));
        *c.mutable_example() = ToProto(d);
        c.mutable_example()->clear_links();
      }
      c.set_total(c.total() + 1);
      if (!d.healthy) c.set_unhealthy(c.unhealthy() + 1);
      if (GivableWhole(d, HoldOn(holds, d.id), node.schedulable())) c.set_free(c.free() + 1);
      nodes_of[d.fingerprint].insert(name);
    }
  }
  std::vector<pb::FingerprintClass> out;
  for (auto& [fp, c] : classes) {
    for (const auto& n : nodes_of[fp]) c.add_nodes(n);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<planner::PoolClass> PlannerPool(const NodeRegistry& nodes) {
  std::vector<planner::PoolClass> classes;
  for (const auto& [name, node] : nodes.entries()) {
    if (!node.schedulable()) continue;  // cards nobody can be given
    const Holds holds = HoldsByDevice(node.claims);
    std::set<std::string> free;
    for (const auto& d : node.inventory.devices) {
      if (GivableWhole(d, HoldOn(holds, d.id), true)) free.insert(d.id);
    }
    planner::AddNode(classes, name, node.inventory, free);
  }
  return classes;
}

PoolSnapshot SnapshotOf(const NodeRegistry& nodes, const JobTable& jobs, absl::Time now) {
  PoolSnapshot snap;
  size_t cards = 0;
  for (const auto& [name, node] : nodes.entries()) cards += node.inventory.devices.size();
  snap.nodes.reserve(nodes.entries().size());
  snap.devices.reserve(cards);
  // Views into the inventories, valid while the lock is held: the kinds are copied once each.
  std::map<std::tuple<Vendor, std::string_view, std::string_view>, uint32_t> kinds;
  for (const auto& [name, node] : nodes.entries()) {
    const auto node_index = static_cast<uint32_t>(snap.nodes.size());
    snap.nodes.push_back({name, node.ready, node.record.drained(), absl::ToDoubleSeconds(now - node.last_heartbeat)});
    const Holds holds = HoldsByDevice(node.claims);
    auto quarantined = [&](const pb::CardQuarantine& q) {  // the whole node's has device ""
      snap.quarantined.push_back(
          {name, q.device_id(), q.reason(), absl::ToDoubleSeconds(FromProtoTime(q.since()) - absl::UnixEpoch())});
    };
    if (node.record.has_quarantine()) quarantined(node.record.quarantine());
    for (const pb::CardQuarantine& q : node.record.quarantined_cards()) quarantined(q);
    for (const auto& d : node.inventory.devices) {
      auto [kind, added] =
          kinds.try_emplace({d.vendor, d.model, d.fingerprint}, static_cast<uint32_t>(snap.kinds.size()));
      if (added) snap.kinds.push_back({std::string(VendorName(d.vendor)), d.model, d.fingerprint});
      DeviceSample& sample = snap.devices.emplace_back();
      sample.node = node_index;
      sample.kind = kind->second;
      sample.device = d.id;
      sample.healthy = d.healthy;
      sample.dirty = !d.dirty.empty();
      sample.schedulable = node.schedulable();
      sample.allocated_milli = AllocatedOf(d, HoldOn(holds, d.id)).milli;
      sample.memory_mib = d.memory_mib;
      sample.memory_used_mib = d.memory_used_mib;
      sample.utilization_percent = d.utilization_percent;
    }
  }
  snap.jobs = jobs.counts();
  return snap;
}

namespace {

// Calls `card` with each card a job's claim holds, the job's spec and the milli-cards held.
void ForEachClaimedCard(const NodeRegistry& nodes, const JobTable& jobs,
                        const std::function<void(const pb::JobSpec&, const DeviceRecord&, int64_t)>& card) {
  for (const auto& [name, node] : nodes.entries()) {
    for (const auto& [job_gen, claim] : node.claims) {
      const JobEntry* entry = jobs.Find(job_gen.first);
      if (entry == nullptr) continue;
      for (const auto& device : node.inventory.devices) {
        for (const auto& id : claim.device_ids) {
          if (device.id == id) card(entry->job().spec(), device, claim.device_milli);
        }
      }
    }
  }
}

}  // namespace

GroupHoldings HoldingsByGroup(const NodeRegistry& nodes, const JobTable& jobs) {
  GroupHoldings out;
  for (const auto& [name, node] : nodes.entries()) {
    for (const auto& device : node.inventory.devices) {
      if (device.Placeable()) out.capacity[CardClassOf(device)] += 1000;
    }
  }
  ForEachClaimedCard(nodes, jobs, [&](const pb::JobSpec& spec, const DeviceRecord& device, int64_t milli) {
    out.held[spec.group()][spec.user()][CardClassOf(device)] += milli;
  });
  // A user who only waits holds nothing, but counts among its group's users.
  jobs.ForEachPending([&](const JobEntry& entry) { out.held[entry.job().spec().group()][entry.job().spec().user()]; });
  return out;
}

QuotaLedger HoldingsLedger(const QuotaTable& quotas, const NodeRegistry& nodes, const JobTable& jobs) {
  QuotaLedger ledger(quotas);
  ForEachClaimedCard(nodes, jobs, [&](const pb::JobSpec& spec, const DeviceRecord& device, int64_t milli) {
    ledger.Hold(spec.user(), spec.group(), device, milli);
  });
  return ledger;
}

absl::Status CheckQuotaAtSubmit(const QuotaTable& quotas, const NodeRegistry& nodes, const JobTable& jobs,
                                const pb::JobSpec& spec) {
  int64_t user_queued = 0, group_queued = 0;
  jobs.ForEachPending([&](const JobEntry& entry) {
    if (entry.job().spec().user() == spec.user()) ++user_queued;
    if (!spec.group().empty() && entry.job().spec().group() == spec.group()) ++group_queued;
  });
  if (auto why = quotas.QueueBlocked(spec.user(), user_queued, spec.group(), group_queued)) {
    return absl::ResourceExhaustedError(*why);
  }
  if (CardsNeeded(spec) == 0 || nodes.empty()) return absl::OkStatus();
  const QuotaLedger ledger = HoldingsLedger(quotas, nodes, jobs);
  // One device per class is enough: cards of a class agree.
  std::map<std::pair<Vendor, std::string>, const DeviceRecord*> classes;
  for (const auto& [name, node] : nodes.entries()) {
    for (const auto& d : node.inventory.devices) classes.try_emplace({d.vendor, d.fingerprint}, &d);
  }
  std::string never, now;
  bool fits_ever = false, fits_now = false;
  for (const auto& [key, device] : classes) {
    if (auto why = ledger.BlockedAlways(spec, *device)) {
      if (never.empty()) never = *why;
    } else {
      fits_ever = true;
    }
    if (auto why = ledger.Blocked(spec, *device)) {
      if (now.empty()) now = *why;
    } else {
      fits_now = true;
    }
  }
  if (!fits_ever) return absl::FailedPreconditionError(absl::StrCat("can never run under its quota: ", never));
  if (quotas.reject_over_quota() && !fits_now) return absl::ResourceExhaustedError(now);
  return absl::OkStatus();
}

}  // namespace hetpool::daemon
