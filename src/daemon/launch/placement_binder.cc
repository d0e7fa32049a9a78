#include "src/daemon/launch/placement_binder.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/card_speed.h"
#include "drivers/fingerprint/fingerprint.h"
#include "drivers/fingerprint/spec_table.h"
#include "planner/pool.h"
#include "src/common/convert.h"
#include "src/common/cpu_list.h"
#include "src/common/plan_convert.h"
#include "src/common/torchrun_lines.h"
#include "src/common/utf8.h"
#include "src/daemon/launch/batch_split.h"
#include "src/daemon/launch/collective.h"
#include "src/daemon/launch/launch_plan.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {
namespace {

const pb::RoleGroup* GroupNamed(const pb::JobSpec& spec, const std::string& name) {
  for (const auto& group : spec.groups()) {
    if (group.name() == name) return &group;
  }
  return nullptr;
}

// Each node's ranks credited with their card's modelled compute (peak x MFU, as the planner times
// steps) in the precision the job (or its group) computes in.
absl::StatusOr<BatchSplit> SplitBatch(const pb::JobSpec& spec, const scheduler::Placement& placement,
                                      const std::vector<NodeEntry*>& placed, const std::vector<LaunchNode>& launch,
                                      const planner::PriceTable& prices) {
  std::vector<SplitNode> nodes;
  std::string precision_names;
  for (size_t i = 0; i < placed.size(); ++i) {
    const pb::RoleGroup* group = GroupNamed(spec, placement.nodes[i].group);
    const pb::DeviceRequirements& requirements = group != nullptr ? group->requirements() : spec.requirements();
    std::set<Precision> asked;
    for (const auto& p : requirements.precisions()) {
      if (auto precision = drivers::ParsePrecision(p); precision.ok()) asked.insert(*precision);
    }
    const Precision precision = drivers::ComputePrecision(asked);
    // Groups that compute in different precisions are each credited in their own; the summary
    // names the first's.
    if (precision_names.empty()) precision_names = std::string(drivers::PrecisionName(precision));
    SplitNode node;
    node.ranks = launch[i].procs > 0 ? launch[i].procs : spec.procs_per_node();
    for (const auto& d : placed[i]->inventory.devices) {
      if (placement.nodes[i].device_ids.empty() || d.id != placement.nodes[i].device_ids.front()) continue;
      node.label = absl::StrCat(VendorName(d.vendor), " ", d.model);
      node.tflops = planner::ModelledTflops(d, precision, prices);
    }
    if (placement.nodes[i].device_ids.empty()) node.label = "cpu";
    nodes.push_back(std::move(node));
  }
  return SplitGlobalBatch(spec.global_batch(), nodes, precision_names);
}

}  // namespace

absl::Status BindPlacement(JobTable& jobs, NodeRegistry& nodes, JobEntry& entry, const scheduler::Placement& placement,
                           const planner::PriceTable& prices) {
  pb::Job job = entry.job();  // the next state: it counts (claims, orders) once it is stored
  std::vector<NodeEntry*> placed;
  for (const auto& assignment : placement.nodes) {
    NodeEntry* node = nodes.Find(assignment.node);
    if (node == nullptr) return absl::InternalError(absl::StrCat("placement names unknown node ", assignment.node));
    placed.push_back(node);
  }
  if (placed.empty()) return absl::InternalError("placement names no node");
  const NodeEntry& rank0 = *placed.front();
  // One node needs no rendezvous port (torchrun --standalone picks a free one itself).
  absl::StatusOr<int> port = 0;
  if (placed.size() > 1) port = nodes.PickRendezvousPort(rank0.record.address(), jobs.Now());
  if (!port.ok()) return port.status();
  LaunchInput input;
  input.job_id = job.id();
  input.generation = job.generation() + 1;
  // A generation after a hardware failure is a restart to the script too (it resumes from its
  // checkpoint), though it spent none of max_restarts.
  input.restart_count = job.restart_count() + job.hardware_requeues();
  input.preempted = job.has_last_preemption() && job.last_preemption().generation() == job.generation();
  input.resized = job.has_last_resize() && job.last_resize().generation() == job.generation();
  input.vendor = placement.vendor;
  input.rendezvous_port = *port;
  if (job.has_array_task()) {
    input.array_index = job.array_task().index();
    input.array_count = job.array_task().count();
  }
  input.device_milli = placement.nodes.front().device_milli;
  input.device_memory_mib = placement.nodes.front().device_memory_mib;
  if (job.has_plan()) input.layout_env = PlanEnvironment(job.plan());
  const bool across_vendors = job.spec().groups_size() > 0 || placement.Mixed();
  bool every_node_has_flagcx = true;
  for (size_t i = 0; i < placed.size(); ++i) {
    const NodeEntry& node = *placed[i];
    const scheduler::NodeAssignment& assignment = placement.nodes[i];
    LaunchNode launch{assignment.node,        node.record.address(), node.record.torchrun_path(),
                      node.record.work_dir(), assignment.device_ids, {}};
    launch.python_path = node.record.python_path();
    std::set<int> cpus, numa_nodes;
    for (const auto& d : node.inventory.devices) {
      launch.device_index[d.id] = d.index;
      if (std::find(assignment.device_ids.begin(), assignment.device_ids.end(), d.id) == assignment.device_ids.end()) {
        continue;
      }
      const std::set<int> near = ParseCpuList(d.local_cpus);
      cpus.insert(near.begin(), near.end());
      if (d.numa_node >= 0) numa_nodes.insert(d.numa_node);
    }
    launch.cpus = FormatCpuList(cpus);
    launch.numa_nodes = FormatCpuList(numa_nodes);
    launch.vendor = assignment.vendor;
    // A job placed across vendors without declared groups has one group per vendor.
    launch.group =
        across_vendors && assignment.group.empty() ? std::string(VendorName(assignment.vendor)) : assignment.group;
    if (const pb::RoleGroup* group = GroupNamed(job.spec(), assignment.group)) launch.procs = group->procs_per_node();
    every_node_has_flagcx = every_node_has_flagcx && node.inventory.collectives.contains("flagcx");
    input.nodes.push_back(std::move(launch));
  }
  if (across_vendors) input.collective = ChooseCollective(job.spec().collective(), every_node_has_flagcx);
  std::string batch_split;
  if (job.spec().global_batch() > 0) {
    auto split = SplitBatch(job.spec(), placement, placed, input.nodes, prices);
    if (!split.ok()) return split.status();
    for (size_t i = 0; i < input.nodes.size(); ++i) input.nodes[i].micro_batches = split->micro_batches[i];
    batch_split = split->summary;
  }
  auto plans = BuildLaunchPlans(job.spec(), input);
  if (!plans.ok()) return plans.status();

  job.set_generation(input.generation);
  std::vector<std::string> vendors;
  for (const auto& assignment : placement.nodes) {
    const std::string name(VendorName(assignment.vendor));
    if (std::find(vendors.begin(), vendors.end(), name) == vendors.end()) vendors.push_back(name);
  }
  job.set_vendor(across_vendors ? absl::StrJoin(vendors, "+") : std::string(VendorName(placement.vendor)));
  job.set_collective(input.collective);
  job.set_batch_split(batch_split);
  job.set_rendezvous_endpoint(*port > 0 ? absl::StrCat(rank0.record.address(), ":", *port) : "");
  job.clear_placement();
  job.clear_launch_plan();
  job.clear_pending();  // placed: no reason to wait
  job.clear_hold();     // nor cards held for it
  for (size_t rank = 0; rank < placement.nodes.size(); ++rank) {
    const auto& assignment = placement.nodes[rank];
    auto* p = job.add_placement();
    p->set_node(assignment.node);
    p->set_node_rank(static_cast<int>(rank));
    p->set_link_score(assignment.link_score);
    p->set_device_milli(assignment.device_milli);
    p->set_device_memory_mib(assignment.device_memory_mib);
    for (const auto& d : assignment.device_ids) p->add_device_ids(d);
    if (across_vendors) {
      p->set_group(input.nodes[rank].group);
      p->set_vendor(std::string(VendorName(assignment.vendor)));
    }
    if (!input.nodes[rank].micro_batches.empty()) p->set_micro_batch(input.nodes[rank].micro_batches.front());
    for (const auto& d : placed[rank]->inventory.devices) {
      if (!assignment.device_ids.empty() && d.id == assignment.device_ids.front()) {
        p->set_fingerprint(d.fingerprint);
        p->set_class_label(drivers::FingerprintLabel(d));
      }
      if (std::find(assignment.device_ids.begin(), assignment.device_ids.end(), d.id) == assignment.device_ids.end()) {
        continue;
      }
      for (const HealthSignal& signal : d.signals) {
        if (signal.severity != Severity::kDegraded) continue;
        p->add_degraded_cards(
            ValidUtf8(absl::StrCat(d.id, ": ", signal.what, " (", signal.source, ")"), kMaxLineBytes));
      }
    }
  }
  for (auto& plan : *plans) *job.add_launch_plan() = std::move(plan);
  job.set_state(pb::JOB_STATE_SCHEDULED);
  job.set_reason("Scheduled");
  std::vector<std::string> where;
  for (const auto& p : job.placement()) {
    where.push_back(absl::StrCat(p.node(), p.device_ids_size() ? "[" : "", absl::StrJoin(p.device_ids(), ","),
                                 p.device_ids_size() ? "]" : ""));
  }
  job.set_message(absl::StrCat("generation ", job.generation(), " on ", absl::StrJoin(where, " ")));
  *job.mutable_scheduled_at() = ToProtoTime(jobs.Now());
  jobs.AddEvent(job, "Scheduled", job.message());
  for (const auto& p : job.placement()) {
    if (p.degraded_cards_size() == 0) continue;
    jobs.AddEvent(job, "DegradedCard",
                  absl::StrCat("on ", p.node(),
                               ", degraded card(s), no well card fitting: ", absl::StrJoin(p.degraded_cards(), "; ")));
  }
  const uint64_t generation = job.generation();
  if (auto s = jobs.Commit(entry, std::move(job)); !s.ok()) return s;
  for (size_t i = 0; i < placed.size(); ++i) {  // the stored placement is in the same (rank) order
    NodeEntry& node = *placed[i];
    nodes.BumpOrders(node);
    node.claims[{entry.job().id(), generation}] =
        PlacedClaim(entry.job(), entry.job().placement(static_cast<int>(i)), node.orders_version);
  }
  return absl::OkStatus();
}

Claim PlacedClaim(const pb::Job& job, const pb::NodePlacement& placement, uint64_t created_at_version) {
  Claim claim;
  claim.device_ids.assign(placement.device_ids().begin(), placement.device_ids().end());
  claim.device_milli = placement.device_milli() > 0 ? placement.device_milli() : 1000;
  claim.device_memory_mib = placement.device_memory_mib();
  claim.cpu_milli = HostCpuMilliPerNode(job.spec());
  claim.host_memory_mib = HostMemoryMibPerNode(job.spec());
  claim.created_at_version = created_at_version;
  claim.rendezvous_endpoint = job.rendezvous_endpoint();
  return claim;
}

}  // namespace hetpool::daemon
