#include "src/daemon/launch/placement_binder.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/fingerprint.h"
#include "src/common/convert.h"
#include "src/common/plan_convert.h"
#include "src/daemon/launch/launch_plan.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {

absl::Status BindPlacement(JobTable& jobs, NodeRegistry& nodes, JobEntry& entry, const scheduler::Placement& placement) {
  pb::Job job = entry.job;  // the next state: it counts (claims, orders) once it is stored
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
  if (placed.size() > 1) port = nodes.PickRendezvousPort(rank0.record.address());
  if (!port.ok()) return port.status();
  LaunchInput input;
  input.job_id = job.id();
  input.generation = job.generation() + 1;
  input.restart_count = job.restart_count();
  input.preempted = job.has_last_preemption() && job.last_preemption().generation() == job.generation();
  input.resized = job.has_last_resize() && job.last_resize().generation() == job.generation();
  input.vendor = placement.vendor;
  input.rendezvous_port = *port;
  input.device_milli = placement.nodes.front().device_milli;
  input.device_memory_mib = placement.nodes.front().device_memory_mib;
  if (job.has_plan()) input.layout_env = PlanEnvironment(job.plan());
  for (size_t i = 0; i < placed.size(); ++i) {
    const NodeEntry& node = *placed[i];
    LaunchNode launch{placement.nodes[i].node, node.record.address(), node.record.torchrun_path(),
                      node.record.work_dir(), placement.nodes[i].device_ids, {}};
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
  job.clear_pending();  // placed: no reason to wait
  for (size_t rank = 0; rank < placement.nodes.size(); ++rank) {
    const auto& assignment = placement.nodes[rank];
    auto* p = job.add_placement();
    p->set_node(assignment.node);
    p->set_node_rank(static_cast<int>(rank));
    p->set_link_score(assignment.link_score);
    p->set_device_milli(assignment.device_milli);
    p->set_device_memory_mib(assignment.device_memory_mib);
    for (const auto& d : assignment.device_ids) p->add_device_ids(d);
    for (const auto& d : placed[rank]->inventory.devices) {
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
    where.push_back(absl::StrCat(p.node(), p.device_ids_size() ? "[" : "", absl::StrJoin(p.device_ids(), ","),
                                 p.device_ids_size() ? "]" : ""));
  }
  job.set_message(absl::StrCat("generation ", job.generation(), " on ", absl::StrJoin(where, " ")));
  *job.mutable_scheduled_at() = ToProtoTime(jobs.Now());
  jobs.AddEvent(job, "Scheduled", job.message());
  const uint64_t generation = job.generation();
  if (auto s = jobs.Commit(entry, std::move(job)); !s.ok()) return s;
  for (size_t i = 0; i < placed.size(); ++i) {  // the stored placement is in the same (rank) order
    NodeEntry& node = *placed[i];
    nodes.BumpOrders(node);
    node.claims[{entry.job.id(), generation}] =
        PlacedClaim(entry.job, entry.job.placement(static_cast<int>(i)), node.orders_version);
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
