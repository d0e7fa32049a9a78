// ClusterState's read views: nodes, devices, fingerprint classes, the planner's pool, usage
// snapshots, quotas and draining.
#include "src/daemon/state/cluster_state.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "drivers/backend_factory.h"
#include "drivers/fingerprint/fingerprint.h"
#include "drivers/fingerprint/spec_table.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"
#include "scheduler/framework/pending_reason.h"
#include "src/common/convert.h"
#include "src/common/plan_convert.h"
#include "src/daemon/launch/launch_plan.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {

pb::Node ClusterState::NodeSnapshot(const NodeEntry& node) const {
  pb::Node out = node.record;
  out.set_state(node.ready ? pb::NODE_STATE_READY : pb::NODE_STATE_NOT_READY);
  *out.mutable_last_heartbeat() = ToProtoTime(node.last_heartbeat);
  for (const auto& [key, claim] : node.claims) {
    if (claim.desired) out.add_running_jobs(key.first);
  }
  // Device use as the daemon sees it (health and memory come from the agent's inventory).
  return out;
}

std::vector<pb::Node> ClusterState::ListNodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::Node> out;
  for (const auto& [name, node] : nodes_) out.push_back(NodeSnapshot(node));
  return out;
}

absl::StatusOr<pb::Node> ClusterState::GetNode(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  return NodeSnapshot(it->second);
}

absl::StatusOr<std::vector<pb::DeviceView>> ClusterState::ListDevices(const std::string& node_name,
                                                                      const std::string& vendor) const {
  if (!vendor.empty() && !ParseVendor(vendor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vendor: unknown vendor '", vendor, "' (known: ", kKnownVendorList, ")"));
  }
  absl::MutexLock lock(&mu_);
  if (!node_name.empty() && !nodes_.contains(node_name)) {
    return absl::NotFoundError(absl::StrCat("node '", node_name, "' not found"));
  }
  std::vector<pb::DeviceView> out;
  for (const auto& [name, node] : nodes_) {
    if (!node_name.empty() && name != node_name) continue;
    const Holds holds = HoldsByDevice(node.claims);
    for (const auto& device : node.inventory.devices) {
      if (!vendor.empty() && VendorName(device.vendor) != vendor) continue;
      pb::DeviceView view;
      view.set_node(name);
      *view.mutable_device() = ToProto(device);
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

std::vector<pb::FingerprintClass> ClusterState::ListFingerprints() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, pb::FingerprintClass> classes;
  std::map<std::string, std::set<std::string>> nodes_of;
  for (const auto& [name, node] : nodes_) {
    const Holds holds = HoldsByDevice(node.claims);
    const bool schedulable = node.ready && !node.record.drained();
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
      if (GivableWhole(d, HoldOn(holds, d.id), schedulable)) c.set_free(c.free() + 1);
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

std::vector<planner::PoolClass> ClusterState::PlannerPool() const {
  absl::MutexLock lock(&mu_);
  std::vector<planner::PoolClass> classes;
  for (const auto& [name, node] : nodes_) {
    const bool schedulable = node.ready && !node.record.drained();
    if (!schedulable) continue;  // cards nobody can be given
    const Holds holds = HoldsByDevice(node.claims);
    std::set<std::string> free;
    for (const auto& d : node.inventory.devices) {
      if (GivableWhole(d, HoldOn(holds, d.id), schedulable)) free.insert(d.id);
    }
    planner::AddNode(classes, name, node.inventory, free);
  }
  return classes;
}

absl::StatusOr<pb::Node> ClusterState::SetDrained(const std::string& name, bool drained) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  if (absl::Status s = SetDrainedLocked(it->second, drained, "by an operator"); !s.ok()) return s;
  return NodeSnapshot(it->second);
}

absl::Status ClusterState::SetDrainedLocked(NodeEntry& node, bool drained, absl::string_view why) {
  if (node.record.drained() == drained) return absl::OkStatus();
  node.record.set_drained(drained);
  if (auto s = store_->PutNode(node.record); !s.ok()) {
    node.record.set_drained(!drained);
    return absl::UnavailableError(absl::StrCat("node state not stored: ", s.message()));
  }
  spdlog::info("node {} {} {}", node.record.name(), drained ? "drained" : "undrained", std::string(why));
  work_pending_ = true;
  Changed();
  return absl::OkStatus();
}

QuotaLedger ClusterState::LedgerLocked() const {
  QuotaLedger ledger(*options_.quotas);
  for (const auto& [name, node] : nodes_) {
    for (const auto& [job_gen, claim] : node.claims) {
      auto job = jobs_.find(job_gen.first);
      if (job == jobs_.end()) continue;
      const pb::JobSpec& spec = job->second.job.spec();
      for (const auto& device : node.inventory.devices) {
        for (const auto& id : claim.device_ids) {
          if (device.id == id) ledger.Hold(spec.user(), spec.group(), device, claim.device_milli);
        }
      }
    }
  }
  return ledger;
}

absl::Status ClusterState::CheckQuotaLocked(const pb::JobSpec& spec) const {
  if (options_.quotas == nullptr) return absl::OkStatus();
  const QuotaTable& quotas = *options_.quotas;
  int64_t user_queued = 0, group_queued = 0;
  for (const auto& [id, entry] : jobs_) {
    if (entry.job.state() != pb::JOB_STATE_PENDING) continue;
    if (entry.job.spec().user() == spec.user()) ++user_queued;
    if (!spec.group().empty() && entry.job.spec().group() == spec.group()) ++group_queued;
  }
  if (auto why = quotas.QueueBlocked(spec.user(), user_queued, spec.group(), group_queued)) {
    return absl::ResourceExhaustedError(*why);
  }
  if (CardsNeeded(spec) == 0 || nodes_.empty()) return absl::OkStatus();
  const QuotaLedger ledger = LedgerLocked();
  // One device per class is enough: cards of a class agree.
  std::map<std::pair<Vendor, std::string>, const DeviceRecord*> classes;
  for (const auto& [name, node] : nodes_) {
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

PoolSnapshot ClusterState::Snapshot() const {
  absl::MutexLock lock(&mu_);
  PoolSnapshot snap;
  const absl::Time now = Now();
  for (const auto& [name, node] : nodes_) {
    snap.nodes.push_back({name, node.ready, node.record.drained(), absl::ToDoubleSeconds(now - node.last_heartbeat)});
    const Holds holds = HoldsByDevice(node.claims);
    for (const auto& d : node.inventory.devices) {
      DeviceSample sample;
      sample.node = name;
      sample.device = d.id;
      sample.vendor = std::string(VendorName(d.vendor));
      sample.model = d.model;
      sample.fingerprint = d.fingerprint;
      sample.healthy = d.healthy;
      sample.schedulable = node.ready && !node.record.drained();
      sample.allocated_milli = AllocatedOf(d, HoldOn(holds, d.id)).milli;
      sample.memory_mib = d.memory_mib;
      sample.memory_used_mib = d.memory_used_mib;
      sample.utilization_percent = d.utilization_percent;
      snap.devices.push_back(std::move(sample));
    }
  }
  for (const auto& [id, entry] : jobs_) ++snap.jobs[{entry.job.state(), entry.job.spec().priority()}];
  return snap;
}

std::vector<pb::Job> ClusterState::JobsRunningSince(absl::Time since, const std::string& user) const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::Job> out;
  for (const auto& [id, entry] : jobs_) {
    const pb::Job& job = entry.job;
    if (!job.has_started_at()) continue;
    if (job.has_finished_at() && FromProtoTime(job.finished_at()) < since) continue;
    if (!user.empty() && job.spec().user() != user) continue;
    out.push_back(job);
  }
  return out;
}

}  // namespace hetpool::daemon
