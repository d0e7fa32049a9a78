// ClusterState's scheduling cycle: the node views the policy decides on, the queue pass with the
// head-of-line reservation, and binding a placement (claims, launch plans, the store).
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

std::vector<scheduler::NodeView> ClusterState::NodeViews(bool all_free) const {
  std::vector<scheduler::NodeView> views;
  views.reserve(nodes_.size());
  for (const auto& [name, node] : nodes_) views.push_back(NodeViewOf(name, node, all_free));
  return views;
}

scheduler::NodeView ClusterState::NodeViewOf(const std::string& name, const NodeEntry& node, bool all_free) const {
  scheduler::NodeView view;
  view.name = name;
  view.schedulable = all_free || (node.ready && !node.record.drained());
  // Shares held per device: whole claims take all of it, fractional ones their slice.
  const Holds holds = all_free ? Holds{} : HoldsByDevice(node.claims);
  view.context.torch_devices = node.inventory.torch_devices.empty()
                                   ? drivers::DefaultTorchDevices(node.inventory.devices)
                                   : node.inventory.torch_devices;
  view.context.metax_cuda_translation = options_.metax_cuda_translation;
  if (auto rack = node.record.labels().find("rack"); rack != node.record.labels().end()) view.rack = rack->second;
  static const Claims kNoClaims;
  const HostFree host = HostFreeOf(node.inventory, all_free ? kNoClaims : node.claims);
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

namespace {

// Marks the devices held for the head of the queue; the Reservation filter keeps the jobs behind
// it off them.
void MarkHeld(const std::map<std::string, std::set<std::string>>& reserved, scheduler::NodeView& view) {
  auto it = reserved.find(view.name);
  if (it == reserved.end()) return;
  for (auto& dv : view.devices) dv.held = it->second.contains(dv.device->id);
  view.generation = scheduler::ContentGeneration(view);
}

}  // namespace

void ClusterState::RefreshView(std::vector<scheduler::NodeView>& views, const std::string& name,
                               const std::map<std::string, std::set<std::string>>& reserved) const {
  auto it = std::lower_bound(views.begin(), views.end(), name,
                             [](const scheduler::NodeView& v, const std::string& n) { return v.name < n; });
  auto node = nodes_.find(name);
  if (it == views.end() || it->name != name || node == nodes_.end()) return;
  *it = NodeViewOf(name, node->second, false);
  MarkHeld(reserved, *it);
}

absl::StatusOr<int> ClusterState::PickRendezvousPort(const std::string& address) {
  std::set<int> used;
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
  for (const auto& [name, node] : nodes_) {
    if (node.record.address() != address) continue;
    for (const auto& [key, claim] : node.claims) note(claim.rendezvous_endpoint);
  }
  const int span = options_.rendezvous_port_max - options_.rendezvous_port_min + 1;
  int& cursor = next_port_[address];
  for (int i = 0; i < span; ++i) {
    const int port = options_.rendezvous_port_min + (cursor + i) % span;
    if (used.contains(port)) continue;
    cursor = (cursor + i + 1) % span;
    return port;
  }
  return absl::ResourceExhaustedError(absl::StrCat("no free rendezvous port on ", address));
}

absl::Status ClusterState::PlaceJob(JobEntry& entry, const scheduler::Placement& placement) {
  pb::Job job = entry.job;  // the next state: it counts (claims, orders) once it is stored
  const NodeEntry& rank0 = nodes_.at(placement.nodes.front().node);
  // One node needs no rendezvous port (torchrun --standalone picks a free one itself).
  absl::StatusOr<int> port = 0;
  if (placement.nodes.size() > 1) port = PickRendezvousPort(rank0.record.address());
  if (!port.ok()) return port.status();
  LaunchInput input;
  input.job_id = job.id();
  input.generation = job.generation() + 1;
  input.restart_count = job.restart_count();
  input.vendor = placement.vendor;
  input.rendezvous_port = *port;
  input.device_milli = placement.nodes.front().device_milli;
  input.device_memory_mib = placement.nodes.front().device_memory_mib;
  if (job.has_plan()) input.layout_env = PlanEnvironment(job.plan());
  for (const auto& assignment : placement.nodes) {
    const NodeEntry& node = nodes_.at(assignment.node);
    LaunchNode launch{assignment.node, node.record.address(), node.record.torchrun_path(),
                      node.record.work_dir(), assignment.device_ids, {}};
    for (const auto& d : node.inventory.devices) launch.device_index[d.id] = d.index;
    input.nodes.push_back(std::move(launch));
  }
  auto plans = BuildLaunchPlans(job.spec(), input);
  if (!plans.ok()) return plans.status();

  job.set_generation(input.generation);
  job.set_vendor(std::string(VendorName(placement.vendor)));
  job.set_rendezvous_endpoint(*port > 0 ? absl::StrCat(rank0.record.address(), ":", *port) : "");
  job.clear_placement();
  job.clear_launch_plan();
  for (size_t rank = 0; rank < placement.nodes.size(); ++rank) {
    const auto& assignment = placement.nodes[rank];
    auto* p = job.add_placement();
    p->set_node(assignment.node);
    p->set_node_rank(static_cast<int>(rank));
    p->set_link_score(assignment.link_score);
    p->set_device_milli(assignment.device_milli);
    p->set_device_memory_mib(assignment.device_memory_mib);
    for (const auto& d : assignment.device_ids) p->add_device_ids(d);
    for (const auto& d : nodes_.at(assignment.node).inventory.devices) {
      if (!assignment.device_ids.empty() && d.id == assignment.device_ids.front()) {
        p->set_fingerprint(d.fingerprint);
        p->set_class_label(drivers::FingerprintLabel(d));
      }
    }
  }
  for (auto& plan : *plans) *job.add_launch_plan() = std::move(plan);
  job.set_state(pb::JOB_STATE_SCHEDULED);
  job.set_reason("Scheduled");
  std::vector<std::string> where;
  for (const auto& p : job.placement()) {
    where.push_back(absl::StrCat(p.node(), p.device_ids_size() ? "[" : "",
                                 absl::StrJoin(p.device_ids(), ","), p.device_ids_size() ? "]" : ""));
  }
  job.set_message(absl::StrCat("generation ", job.generation(), " on ", absl::StrJoin(where, " ")));
  *job.mutable_scheduled_at() = ToProtoTime(Now());
  AddEvent(job, "Scheduled", job.message());
  const uint64_t generation = job.generation();
  if (auto s = Commit(entry, std::move(job)); !s.ok()) return s;
  for (const auto& assignment : placement.nodes) {
    NodeEntry& node = nodes_.at(assignment.node);
    BumpOrders(node);
    Claim& claim = node.claims[{entry.job.id(), generation}];
    claim.device_ids = assignment.device_ids;
    claim.device_milli = assignment.device_milli;
    claim.device_memory_mib = assignment.device_memory_mib;
    claim.cpu_milli = HostCpuMilliPerNode(entry.job.spec());
    claim.host_memory_mib = HostMemoryMibPerNode(entry.job.spec());
    claim.created_at_version = node.orders_version;
    claim.rendezvous_endpoint = entry.job.rendezvous_endpoint();
  }
  return absl::OkStatus();
}

void ClusterState::ScheduleLocked(const std::vector<std::string>* only) {
  std::vector<JobEntry*> pending;
  if (only != nullptr) {
    for (const std::string& id : *only) {
      auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second.job.state() == pb::JOB_STATE_PENDING) pending.push_back(&it->second);
    }
  } else {
    for (auto& [id, entry] : jobs_) {
      if (entry.job.state() == pb::JOB_STATE_PENDING) pending.push_back(&entry);
    }
  }
  // The policy's queue order (the profile's QueueSort plugin: by default higher priority first,
  // then submission order).
  auto queued = [](const JobEntry* e) { return scheduler::QueuedJob{e->job.spec().priority(), e->job.submit_seq()}; };
  std::sort(pending.begin(), pending.end(), [this, &queued](const JobEntry* a, const JobEntry* b) {
    return policy_->QueueLess(queued(a), queued(b));
  });
  // The first job that waits for capacity (the head of the queue) reserves the nodes closest to
  // holding it; jobs behind it may use other devices (backfill) but not the ones it could use
  // there, so they never delay it. Only one reservation: more would let a long queue of big
  // jobs idle the whole pool. A cycle for new submissions only keeps the last full cycle's.
  std::map<std::string, std::set<std::string>> reserved;  // node -> device ids
  if (only != nullptr) reserved = reserved_;
  std::optional<QuotaLedger> ledger;
  if (options_.quotas != nullptr) ledger.emplace(LedgerLocked());
  // The views are built once per cycle; a placement refreshes only the nodes it changed, so the
  // policy re-reads only those (NodeView.generation).
  std::vector<scheduler::NodeView> base = NodeViews(false);
  auto apply_reservation = [&base, &reserved]() {
    for (auto& view : base) MarkHeld(reserved, view);
  };
  apply_reservation();
  for (JobEntry* entry : pending) {
    scheduler::PlacementRequest request = ToPlacementRequest(entry->job.spec());
    // The Quota filter asks the ledger whether the owner may take more cards of a class.
    const pb::JobSpec& spec = entry->job.spec();
    if (ledger && CardsNeeded(spec) > 0) {
      request.quota_blocked = [&ledger, &spec](const DeviceRecord& device) { return ledger->Blocked(spec, device); };
      request.quota_owner = absl::StrCat(spec.user(), "/", spec.group());
    }
    // Binding is PlaceJob: claims, launch plans and the store, under this same lock.
    class JobBinder final : public scheduler::Binder {
     public:
      JobBinder(ClusterState& state, JobEntry& entry) : state_(state), entry_(entry) {}
      absl::Status Bind(const scheduler::Placement& placement) override {
        state_.mu_.AssertHeld();
        entry_.job.clear_pending();  // placed: no reason to wait (stored with the placement)
        return state_.PlaceJob(entry_, placement);
      }

     private:
      ClusterState& state_;
      JobEntry& entry_;
    } binder(*this, *entry);
    const absl::Time decision_start = absl::Now();
    auto placement = policy_->Schedule(request, base, binder);
    if (options_.observer != nullptr) options_.observer->Decision(absl::Now() - decision_start, placement.ok());
    if (placement.ok()) {
      if (ledger) ledger->HoldPlacement(entry->job.spec(), *placement, base);
      for (const auto& assignment : placement->nodes) RefreshView(base, assignment.node, reserved);
      continue;
    }
    absl::Status status = placement.status();
    if (!scheduler::PendingReasonOf(status).has_value()) {  // placed but not bound: read the state again
      base = NodeViews(false);
      apply_reservation();
    }
    const scheduler::PendingReason waited = scheduler::PendingReasonOf(status).value_or(scheduler::PendingReason{});
    pb::PendingReason why = ToProto(waited);
    if (auto quota = waited.waiting_reasons.find("Quota"); quota != waited.waiting_reasons.end() && absl::IsUnavailable(status)) {
      // Waiting on its owner's quota, not on the pool: it holds no nodes for itself either.
      why.set_quota(quota->second);
    } else if (absl::IsUnavailable(status) && reserved.empty() && request.devices_per_node > 0) {
      reserved = ReservationFor(request, base);  // nothing is reserved yet: these are the plain views
      if (!reserved.empty()) {
        apply_reservation();
        std::vector<std::string> names;
        for (const auto& [node, devices] : reserved) names.push_back(node);
        why.set_held_for_it(absl::StrJoin(names, ","));
        status = absl::UnavailableError(
            absl::StrCat(status.message(), "; first in line: holding ", absl::StrJoin(names, ","), " for it"));
      }
    }
    if (why.needs().empty()) why.set_never_fits(absl::IsFailedPrecondition(status));
    // Still pending: record why, once per distinct reason.
    const std::string reason =
        absl::IsFailedPrecondition(status) ? "Unresolvable" : "Unschedulable";
    const std::string message = std::string(status.message());
    if (entry->job.reason() != reason || entry->job.message() != message ||
        !google::protobuf::util::MessageDifferencer::Equals(entry->job.pending(), why)) {
      entry->job.set_reason(reason);
      entry->job.set_message(message);
      *entry->job.mutable_pending() = std::move(why);
      AddEvent(entry->job, reason, message);
      // Why a job waits is recomputed every cycle (and after a restart), so it is not written to
      // the store: the next state change carries it. Watchers still hear of it now.
      ++entry->version;
      Changed();
    }
  }
  if (only == nullptr) reserved_ = std::move(reserved);
}

std::map<std::string, std::set<std::string>> ClusterState::ReservationFor(
    const scheduler::PlacementRequest& request, const std::vector<scheduler::NodeView>& views) const {
  // Per node: the qualifying devices of the vendor with the most of them, and how many are free.
  struct Option {
    std::string node;
    size_t free = 0;
    std::set<std::string> devices;
  };
  std::vector<Option> options;
  scheduler::QualifyCache qualify(request.requirements);
  for (const auto& view : views) {
    if (!view.schedulable) continue;
    qualify.SetNode(view.context);
    std::map<Vendor, Option> by_vendor;
    for (const auto& dv : view.devices) {
      if (!dv.device->healthy || qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
      Option& o = by_vendor[dv.device->vendor];
      o.node = view.name;
      o.devices.insert(dv.device->id);
      o.free += scheduler::Available(request, dv) ? 1 : 0;
    }
    const Option* best = nullptr;
    for (const auto& [vendor, o] : by_vendor) {
      if (static_cast<int>(o.devices.size()) < request.devices_per_node) continue;
      if (best == nullptr || o.free > best->free) best = &o;
    }
    if (best != nullptr) options.push_back(*best);
  }
  if (static_cast<int>(options.size()) < request.nnodes) return {};
  // Most free first: those nodes are likely to hold the job soonest.
  std::stable_sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
    if (a.free != b.free) return a.free > b.free;
    return a.node < b.node;
  });
  std::map<std::string, std::set<std::string>> out;
  for (int i = 0; i < request.nnodes; ++i) out[options[static_cast<size_t>(i)].node] = options[static_cast<size_t>(i)].devices;
  return out;
}

}  // namespace hetpool::daemon
