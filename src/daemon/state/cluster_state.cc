#include "src/daemon/state/cluster_state.h"

#include <algorithm>
#include <random>

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
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {
namespace {

bool Active(pb::JobState state) {
  return state == pb::JOB_STATE_SCHEDULED || state == pb::JOB_STATE_RUNNING;
}

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
    }
  }
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

pb::PendingReason ToProto(const scheduler::PendingReason& r) {
  pb::PendingReason out;
  out.set_never_fits(r.never);
  out.set_needs(r.needs);
  out.set_closest(r.closest);
  for (const auto& [plugin, n] : r.nodes_rejected) (*out.mutable_nodes_rejected())[plugin] = n;
  for (const auto& reason : r.device_reasons) out.add_device_reasons(reason);
  return out;
}

scheduler::PlacementRequest ToPlacementRequest(const pb::JobSpec& spec) {
  scheduler::PlacementRequest req;
  req.nnodes = spec.nnodes();
  req.devices_per_node = spec.devices_per_node();
  for (const auto& v : spec.requirements().vendors()) {
    if (auto vendor = ParseVendor(v)) req.requirements.vendors.push_back(*vendor);
  }
  req.requirements.models.assign(spec.requirements().models().begin(),
                                 spec.requirements().models().end());
  req.requirements.fingerprints.assign(spec.requirements().fingerprints().begin(),
                                       spec.requirements().fingerprints().end());
  if (spec.device_milli() > 0) req.device_milli = spec.device_milli();
  req.device_memory_mib = spec.device_memory_mib();
  req.cpu_milli = HostCpuMilliPerNode(spec);
  req.host_memory_mib = HostMemoryMibPerNode(spec);
  // Validated at submission, so parsing cannot fail here.
  drivers::RunRequirements& run = req.requirements.run;
  const pb::DeviceRequirements& r = spec.requirements();
  run.min_memory_mib = r.min_memory_mib();
  run.min_driver_version = r.min_driver_version();
  run.min_runtime_version = r.min_runtime_version();
  for (const auto& p : r.precisions()) {
    if (auto precision = drivers::ParsePrecision(p); precision.ok()) run.precisions.insert(*precision);
  }
  run.code.pytorch = r.code().pytorch();
  run.code.cuda_sass.assign(r.code().cuda_sass().begin(), r.code().cuda_sass().end());
  run.code.cuda_ptx.assign(r.code().cuda_ptx().begin(), r.code().cuda_ptx().end());
  run.code.maca = r.code().maca();
  run.code.bang.assign(r.code().bang().begin(), r.code().bang().end());
  run.code.spirv = r.code().spirv();
  return req;
}

}  // namespace

ClusterState::ClusterState(ClusterOptions options, Store* store, scheduler::PlacementPolicy* policy)
    : options_(std::move(options)), store_(store), policy_(policy) {}

ClusterState::~ClusterState() { Stop(); }

bool ClusterState::store_healthy() const {
  absl::MutexLock lock(&mu_);
  return store_healthy_;
}

bool ClusterState::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void ClusterState::Changed() { changed_.SignalAll(); }

void ClusterState::BumpOrders(NodeEntry& node) {
  ++node.orders_version;
  Changed();
}

absl::Status ClusterState::Load() {
  auto nodes = store_->LoadNodes();
  if (!nodes.ok()) return nodes.status();
  auto jobs = store_->LoadJobs();
  if (!jobs.ok()) return jobs.status();
  auto highest_seq = store_->HighestJobSeq();
  if (!highest_seq.ok()) return highest_seq.status();
  absl::MutexLock lock(&mu_);
  // Ids are never handed out twice: above every job loaded and every number the store recorded.
  next_seq_ = std::max<uint64_t>(next_seq_, *highest_seq + 1);
  const absl::Time now = Now();
  // Orders versions continue above anything an agent saw from an earlier daemon process.
  const uint64_t version_base = static_cast<uint64_t>(absl::ToUnixMicros(now));
  for (auto& record : *nodes) {
    auto inventory = FromProto(record.inventory());
    if (!inventory.ok()) {
      spdlog::warn("stored node {} has an unusable inventory ({}); waiting for it to re-register",
                   record.name(), std::string(inventory.status().message()));
      inventory = NodeInventory{};
    }
    NodeEntry& node = nodes_[record.name()];
    node.record = std::move(record);
    node.inventory = *std::move(inventory);
    node.ready = false;
    node.last_heartbeat = now;  // one lease of grace to re-register
    node.orders_version = version_base;
  }
  for (auto& job : *jobs) {
    next_seq_ = std::max<uint64_t>(next_seq_, job.submit_seq() + 1);
    if (!job.request_id().empty()) job_by_request_[{job.spec().user(), job.request_id()}] = job.id();
    if (Active(job.state())) {
      for (const auto& p : job.placement()) {
        if (p.exited()) continue;
        auto node = nodes_.find(p.node());
        if (node == nodes_.end()) continue;
        Claim& claim = node->second.claims[{job.id(), job.generation()}];
        claim.device_ids.assign(p.device_ids().begin(), p.device_ids().end());
        claim.device_milli = p.device_milli() > 0 ? p.device_milli() : 1000;
        claim.device_memory_mib = p.device_memory_mib();
        claim.cpu_milli = HostCpuMilliPerNode(job.spec());
        claim.host_memory_mib = HostMemoryMibPerNode(job.spec());
        claim.created_at_version = version_base;
        claim.rendezvous_endpoint = job.rendezvous_endpoint();
      }
    }
    const std::string id = job.id();
    jobs_[id].job = std::move(job);
  }
  work_pending_ = true;
  spdlog::info("loaded {} jobs and {} nodes from the store", jobs_.size(), nodes_.size());
  return absl::OkStatus();
}

void ClusterState::Start() {
  loop_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        if (!work_pending_ && new_jobs_.empty()) changed_.WaitWithTimeout(&mu_, options_.tick);
        if (stopping_) return;
      }
      Tick();
    }
  });
}

void ClusterState::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    Changed();
  }
  if (loop_.joinable()) loop_.join();
}

namespace {
constexpr absl::Duration kFullCycleEvery = absl::Minutes(1);
constexpr size_t kMaxListPageBytes = 3 << 20;
}  // namespace

void ClusterState::Tick() {
  absl::MutexLock lock(&mu_);
  ExpireLeasesLocked();
  // Nothing that frees capacity happened (every such change sets work_pending_): the jobs
  // already waiting still wait, so place only the new submissions. A full cycle runs anyway once
  // a minute, a safety net that costs one pass over the queue.
  if (!work_pending_ && Now() - last_full_cycle_ < kFullCycleEvery) {
    std::vector<std::string> fresh;
    fresh.swap(new_jobs_);
    ScheduleLocked(&fresh);
    return;
  }
  work_pending_ = false;
  new_jobs_.clear();
  last_full_cycle_ = Now();
  ScheduleLocked(nullptr);
}

// ---------------------------------------------------------------------------------------------
// Jobs

absl::Status ClusterState::WriteJob(const pb::Job& job) {
  const absl::Time start = absl::Now();
  absl::Status s = store_->PutJob(job);
  if (options_.observer != nullptr) options_.observer->StoreWrite(absl::Now() - start, s.ok());
  return s;
}

void ClusterState::NoteStoreWriteLocked(const absl::Status& written) {
  if (!written.ok() && store_healthy_) spdlog::error("the store refuses writes: {}", std::string(written.message()));
  if (written.ok() && !store_healthy_) spdlog::info("the store accepts writes again");
  store_healthy_ = written.ok();
}

absl::Status ClusterState::Commit(JobEntry& entry, pb::Job next) {
  const absl::Status written = WriteJob(next);
  NoteStoreWriteLocked(written);
  if (!written.ok()) {
    // Nothing changes in memory either: what is not stored is neither acknowledged nor acted
    // on. The caller fails its RPC, or leaves the agent's report to be applied again.
    return absl::UnavailableError(absl::StrCat("the store refused the change to job ", next.id(), " (",
                                               written.message(), "); nothing was changed"));
  }
  pb::Job before = std::exchange(entry.job, std::move(next));
  ++entry.version;
  if (options_.observer != nullptr) {
    const pb::Job& job = entry.job;
    if (IsTerminal(job.state()) && !IsTerminal(before.state())) options_.observer->JobEnded(job);
    if (job.restart_count() > before.restart_count() && job.events_size() > 0) {
      options_.observer->JobRestarted(job.events(job.events_size() - 1).reason());
    }
  }
  Changed();
  return absl::OkStatus();
}

void ClusterState::AddEvent(pb::Job& job, std::string reason, std::string message) const {
  if (!message.empty()) spdlog::info("job {}: {} {}", job.id(), reason, message);
  auto* event = job.add_events();
  *event->mutable_time() = ToProtoTime(Now());
  event->set_state(job.state());
  event->set_reason(std::move(reason));
  event->set_message(std::move(message));
  if (static_cast<size_t>(job.events_size()) > options_.max_events_per_job) {
    // Keep the first event (submission) and the newest ones.
    job.mutable_events()->DeleteSubrange(1, 1);
  }
}

pb::NodePlacement* ClusterState::PlacementOn(pb::Job& job, const std::string& node) const {
  for (auto& p : *job.mutable_placement()) {
    if (p.node() == node) return &p;
  }
  return nullptr;
}

absl::StatusOr<pb::Job> ClusterState::Submit(pb::JobSpec spec, const std::string& request_id,
                                             const pb::PlanRow* plan) {
  if (auto s = ValidateAndNormalizeSpec(spec); !s.ok()) return s;
  if (request_id.size() > 128) return absl::InvalidArgumentError("request_id: longer than 128 bytes");
  JobEntry entry;
  const RequestKey request{spec.user(), request_id};
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
    if (!request_id.empty()) {
      // A retry while the first copy is still being written waits for that write's outcome.
      auto settled = [this, &request]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !requests_in_flight_.contains(request);
      };
      mu_.Await(absl::Condition(&settled));
      if (auto it = job_by_request_.find(request); it != job_by_request_.end()) {
        const pb::Job& first = jobs_.at(it->second).job;
        // A retry sends the same job; the same key with another job is a client bug to report.
        if (!google::protobuf::util::MessageDifferencer::Equals(first.spec(), spec)) {
          return absl::AlreadyExistsError(absl::StrCat("request_id: ", request_id, " was used by ", first.id(),
                                                       " with a different spec"));
        }
        return first;  // a retried submission: the first one stands
      }
    }
    // Refuse what no node of the pool could ever run; an empty pool accepts (nodes may come).
    if (!nodes_.empty()) {
      auto feasible = policy_->Place(ToPlacementRequest(spec), NodeViews(/*all_free=*/true));
      if (!feasible.ok() && absl::IsFailedPrecondition(feasible.status())) {
        return absl::FailedPreconditionError(
            absl::StrCat("nnodes/devices_per_node/requirements: ", feasible.status().message()));
      }
    }
    if (auto s = CheckQuotaLocked(spec); !s.ok()) return s;
    const uint64_t seq = next_seq_++;  // a failed write burns its number
    pb::Job& job = entry.job;
    job.set_id(absl::StrFormat("job-%06d", seq));
    job.set_submit_seq(seq);
    job.set_request_id(request_id);
    *job.mutable_spec() = std::move(spec);
    if (plan) *job.mutable_plan() = *plan;
    job.set_state(pb::JOB_STATE_PENDING);
    *job.mutable_created_at() = ToProtoTime(Now());
    AddEvent(entry.job, "Submitted", absl::StrCat("by ", entry.job.spec().user()));
    if (!request_id.empty()) requests_in_flight_.insert(request);
  }
  // Durable before it is acknowledged or visible, written outside the lock so that concurrent
  // submissions share one commit (the store groups them). On failure nothing is kept.
  const absl::Status written = WriteJob(entry.job);
  absl::MutexLock lock(&mu_);
  NoteStoreWriteLocked(written);
  requests_in_flight_.erase(request);
  if (!written.ok()) return absl::UnavailableError(absl::StrCat("job not stored: ", written.message()));
  const std::string id = entry.job.id();
  if (!request_id.empty()) job_by_request_[request] = id;
  auto& stored = jobs_[id] = std::move(entry);
  new_jobs_.push_back(id);
  Changed();
  return stored.job;
}

absl::StatusOr<pb::Job> ClusterState::GetJob(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  return it->second.job;
}

absl::StatusOr<pb::ListJobsResponse> ClusterState::ListJobs(const pb::ListJobsRequest& req) const {
  if (req.page_size() < 0) return absl::InvalidArgumentError("page_size: must not be negative");
  const int page_size = req.page_size() == 0 ? 100 : std::min(req.page_size(), 1000);
  uint64_t after_seq = 0;
  if (!req.page_token().empty() && !absl::SimpleAtoi(req.page_token(), &after_seq)) {
    return absl::InvalidArgumentError("page_token: not a token returned by ListJobs");
  }
  std::set<int> states(req.states().begin(), req.states().end());
  absl::MutexLock lock(&mu_);
  std::vector<const pb::Job*> matching;
  for (const auto& [id, entry] : jobs_) {
    const pb::Job& job = entry.job;
    if (job.submit_seq() <= after_seq) continue;
    if (!states.empty() && !states.contains(job.state())) continue;
    if (!req.user().empty() && job.spec().user() != req.user()) continue;
    bool labels_match = true;
    for (const auto& [k, v] : req.labels()) {
      auto it = job.spec().labels().find(k);
      if (it == job.spec().labels().end() || it->second != v) labels_match = false;
    }
    if (labels_match) matching.push_back(&job);
  }
  std::sort(matching.begin(), matching.end(),
            [](const pb::Job* a, const pb::Job* b) { return a->submit_seq() < b->submit_seq(); });
  pb::ListJobsResponse response;
  size_t bytes = 0;
  for (const pb::Job* job : matching) {
    // A page ends at its count or before it would pass a client's default 4 MiB message limit.
    const size_t job_bytes = job->ByteSizeLong();
    if (response.jobs_size() == page_size || (response.jobs_size() > 0 && bytes + job_bytes > kMaxListPageBytes)) {
      response.set_next_page_token(absl::StrCat(response.jobs(response.jobs_size() - 1).submit_seq()));
      break;
    }
    bytes += job_bytes;
    *response.add_jobs() = *job;
  }
  return response;
}

absl::StatusOr<pb::Job> ClusterState::Cancel(const std::string& id, const std::string& reason) {
  if (reason.size() > 1024) return absl::InvalidArgumentError("reason: longer than 1024 bytes");
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  JobEntry& entry = it->second;
  if (IsTerminal(entry.job.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " already ended (", JobStateName(entry.job.state()), ")"));
  }
  const std::string message = reason.empty() ? "cancelled by request" : reason;
  pb::Job next = entry.job;
  next.set_state(pb::JOB_STATE_CANCELLED);
  next.set_reason("Cancelled");
  next.set_message(message);
  *next.mutable_finished_at() = ToProtoTime(Now());
  AddEvent(next, "Cancelled", message);
  if (auto s = Commit(entry, std::move(next)); !s.ok()) return s;
  ReleaseClaims(entry, "job cancelled");
  return entry.job;
}

absl::StatusOr<std::pair<pb::Job, uint64_t>> ClusterState::WaitJob(const std::string& id,
                                                                   uint64_t after_version,
                                                                   absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
    if (it->second.version > after_version || stopping_ || Now() >= deadline) {
      return std::make_pair(it->second.job, it->second.version);
    }
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

// ---------------------------------------------------------------------------------------------
// Scheduling

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

// Devices held for the head of the queue look busy to the jobs behind it.
void MaskReserved(const std::map<std::string, std::set<std::string>>& reserved, scheduler::NodeView& view) {
  auto it = reserved.find(view.name);
  if (it == reserved.end()) return;
  for (auto& dv : view.devices) {
    if (it->second.contains(dv.device->id)) {
      dv.free = false;
      dv.milli_free = 0;
    }
  }
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
  MaskReserved(reserved, *it);
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
    for (auto& view : base) MaskReserved(reserved, view);
  };
  apply_reservation();
  std::vector<scheduler::NodeView> masked;  // a job's own copy when its owner's quota hides cards
  for (JobEntry* entry : pending) {
    const scheduler::PlacementRequest request = ToPlacementRequest(entry->job.spec());
    // Cards the owner may not take more of look busy to this job.
    std::string over_quota;
    if (ledger) {
      masked = base;
      over_quota = ledger->Mask(entry->job.spec(), masked);
      if (!over_quota.empty()) {
        for (auto& view : masked) view.generation = scheduler::ContentGeneration(view);
      }
    }
    std::vector<scheduler::NodeView>& views = over_quota.empty() ? base : masked;
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
    auto placement = policy_->Schedule(request, views, binder);
    if (options_.observer != nullptr) options_.observer->Decision(absl::Now() - decision_start, placement.ok());
    if (placement.ok()) {
      if (ledger) ledger->HoldPlacement(entry->job.spec(), *placement, views);
      for (const auto& assignment : placement->nodes) RefreshView(base, assignment.node, reserved);
      continue;
    }
    absl::Status status = placement.status();
    if (!scheduler::PendingReasonOf(status).has_value()) {  // placed but not bound: read the state again
      base = NodeViews(false);
      apply_reservation();
    }
    pb::PendingReason why = ToProto(scheduler::PendingReasonOf(status).value_or(scheduler::PendingReason{}));
    if (!over_quota.empty() && absl::IsUnavailable(status)) {
      // Waiting on its owner's quota, not on the pool: it holds no nodes for itself either.
      why.set_quota(over_quota);
      status = absl::UnavailableError(absl::StrCat(over_quota, "; ", status.message()));
    } else if (absl::IsUnavailable(status) && reserved.empty() && request.devices_per_node > 0) {
      reserved = ReservationFor(request, views);  // nothing is reserved yet: these are the plain views
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

void ClusterState::ReleaseClaims(JobEntry& entry, const std::string& reason) {
  const JobGen key{entry.job.id(), entry.job.generation()};
  for (const auto& p : entry.job.placement()) {
    auto node = nodes_.find(p.node());
    if (node == nodes_.end()) continue;
    auto claim = node->second.claims.find(key);
    if (claim == node->second.claims.end() || !claim->second.desired) continue;
    BumpOrders(node->second);
    claim->second.desired = false;
    claim->second.kill_reason = reason;
    claim->second.undesired_at_version = node->second.orders_version;
  }
  work_pending_ = true;
}

absl::Status ClusterState::FailOrRestart(JobEntry& entry, pb::Job job, const std::string& reason,
                                         const std::string& message) {
  if (job.restart_count() < job.spec().max_restarts()) {
    job.set_restart_count(job.restart_count() + 1);
    job.set_state(pb::JOB_STATE_PENDING);
    job.set_reason("Restarting");
    job.set_message(absl::StrCat(message, "; restart ", job.restart_count(), " of ",
                                 job.spec().max_restarts()));
    AddEvent(job, reason, job.message());
  } else {
    job.set_state(pb::JOB_STATE_FAILED);
    job.set_reason(reason);
    job.set_message(message);
    *job.mutable_finished_at() = ToProtoTime(Now());
    AddEvent(job, reason, message);
  }
  if (auto s = Commit(entry, std::move(job)); !s.ok()) return s;
  ReleaseClaims(entry, absl::StrCat("gang stopped: ", message));
  return absl::OkStatus();
}

absl::Status ClusterState::OnNodeExited(JobEntry& entry, const std::string& node, int exit_code,
                                        const std::string& message) {
  pb::Job job = entry.job;
  pb::NodePlacement* p = PlacementOn(job, node);
  if (p == nullptr) return absl::OkStatus();
  p->set_started(true);
  p->set_exited(true);
  p->set_exit_code(exit_code);
  p->set_exit_message(message);
  if (exit_code != 0) {
    return FailOrRestart(entry, std::move(job), kRestartNonZeroExit,
                         absl::StrCat("node ", node, " exited with code ", exit_code, message.empty() ? "" : ": ",
                                      message));
  }
  AddEvent(job, "NodeSucceeded", absl::StrCat("node ", node, " finished"));
  const bool all_done = std::all_of(job.placement().begin(), job.placement().end(),
                                    [](const pb::NodePlacement& q) { return q.exited(); });
  if (all_done) {
    job.set_state(pb::JOB_STATE_SUCCEEDED);
    job.set_reason("Succeeded");
    job.set_message("every node exited with code 0");
    *job.mutable_finished_at() = ToProtoTime(Now());
    AddEvent(job, "Succeeded", job.message());
    work_pending_ = true;
  }
  return Commit(entry, std::move(job));
}

// ---------------------------------------------------------------------------------------------
// Agents

absl::Status ClusterState::CheckSessionLocked(const std::string& node, const std::string& session) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.session_id.empty() || it->second.session_id != session) {
    return absl::NotFoundError(absl::StrCat("no live session ", session, " for node '", node,
                                            "'; register again"));
  }
  return absl::OkStatus();
}

void ClusterState::ApplyProcessReports(
    NodeEntry& node, const google::protobuf::RepeatedPtrField<pb::ProcessStatus>& reports,
    bool registering) {
  const std::string& node_name = node.record.name();
  std::set<JobGen> reported;
  for (const auto& r : reports) {
    const JobGen key{r.job_id(), r.generation()};
    reported.insert(key);
    auto claim_it = node.claims.find(key);
    if (claim_it == node.claims.end()) {
      if (r.running()) {
        // A process the daemon does not want here (stale generation, or a job that ended while
        // the daemon was down): hold its devices and order it stopped.
        BumpOrders(node);
        Claim& claim = node.claims[key];
        claim.device_ids.assign(r.device_ids().begin(), r.device_ids().end());
        if (auto job = jobs_.find(r.job_id()); job != jobs_.end()) {  // it holds what its job asks
          claim.cpu_milli = HostCpuMilliPerNode(job->second.job.spec());
          claim.host_memory_mib = HostMemoryMibPerNode(job->second.job.spec());
        }
        claim.desired = false;
        claim.kill_reason = "not assigned to this node by the daemon";
        claim.undesired_at_version = node.orders_version;
      }
      continue;
    }
    Claim& claim = claim_it->second;
    auto job_it = jobs_.find(r.job_id());
    if (!claim.desired || job_it == jobs_.end()) {
      if (r.exited()) {
        node.claims.erase(claim_it);
        BumpOrders(node);
        work_pending_ = true;
      }
      continue;
    }
    JobEntry& entry = job_it->second;
    // A report whose change cannot be stored is not applied: the claim stays, and the agent
    // reports the same again with its next heartbeat (it reports an exit until told to forget).
    if (r.exited()) {
      if (!OnNodeExited(entry, node_name, r.exit_code(), r.message()).ok()) continue;
      node.claims.erase(claim_it);
      BumpOrders(node);
      work_pending_ = true;
    } else if (r.running()) {
      pb::Job next = entry.job;
      pb::NodePlacement* p = PlacementOn(next, node_name);
      if (p == nullptr) continue;
      const bool ranks_news = p->global_ranks_size() == 0 && r.global_ranks_size() > 0;
      if (ranks_news) *p->mutable_global_ranks() = r.global_ranks();
      if (!p->started()) {
        p->set_started(true);
        AddEvent(next, "NodeStarted", absl::StrCat("node ", node_name, " started pid ", r.pid(),
                                                   r.note().empty() ? "" : "; ", r.note()));
        const bool all_started = std::all_of(next.placement().begin(), next.placement().end(),
                                             [](const pb::NodePlacement& q) { return q.started(); });
        if (all_started && next.state() == pb::JOB_STATE_SCHEDULED) {
          next.set_state(pb::JOB_STATE_RUNNING);
          next.set_reason("Running");
          next.set_message("every node started");
          *next.mutable_started_at() = ToProtoTime(Now());
          AddEvent(next, "Running", next.message());
        }
      } else if (!ranks_news) {
        continue;
      }
      Commit(entry, std::move(next)).IgnoreError();  // retried with the next report
    }
  }
  // Claims the agent no longer reports.
  for (auto it = node.claims.begin(); it != node.claims.end();) {
    const auto& [key, claim] = *it;
    if (reported.contains(key)) {
      ++it;
      continue;
    }
    if (!claim.desired) {
      // Gone once the agent has acted on the kill (or never started it).
      if (registering || node.applied_version >= claim.undesired_at_version) {
        it = node.claims.erase(it);
        work_pending_ = true;
        continue;
      }
      ++it;
      continue;
    }
    auto job_it = jobs_.find(key.first);
    pb::NodePlacement* p = job_it == jobs_.end() ? nullptr : PlacementOn(job_it->second.job, node_name);
    const bool should_know = registering ? (p != nullptr && p->started())
                                         : node.applied_version >= claim.created_at_version;
    if (!should_know || p == nullptr) {
      ++it;
      continue;
    }
    // The agent acted on the launch (or ran it before) but has no record: the processes are gone.
    // Unstored, the claim stays and the next report tries again.
    if (!FailOrRestart(job_it->second, job_it->second.job, kRestartProcessLost,
                       absl::StrCat("node ", node_name, " no longer has the job's processes"))
             .ok()) {
      ++it;
      continue;
    }
    it = node.claims.erase(it);
    work_pending_ = true;
  }
}

absl::StatusOr<pb::RegisterResponse> ClusterState::Register(const pb::RegisterRequest& req) {
  if (auto s = ValidateNodeName(req.node_name()); !s.ok()) return s;
  if (req.address().empty() || req.address().size() > 255) {
    return absl::InvalidArgumentError("address: required, at most 255 characters");
  }
  if (req.torchrun_path().empty() || req.torchrun_path()[0] != '/') {
    return absl::InvalidArgumentError("torchrun_path: must be an absolute path");
  }
  if (req.work_dir().empty() || req.work_dir()[0] != '/') {
    return absl::InvalidArgumentError("work_dir: must be an absolute path");
  }
  auto inventory = FromProto(req.inventory());
  if (!inventory.ok()) return inventory.status();
  if (req.labels_size() > 32) return absl::InvalidArgumentError("labels: more than 32 labels");
  for (const auto& [k, v] : req.labels()) {
    if (k.empty() || k.size() > 63 || v.size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat("labels[", k, "]: key 1-63 bytes, value at most 256"));
    }
  }

  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
  const bool known = nodes_.contains(req.node_name());
  NodeEntry& node = nodes_[req.node_name()];
  const absl::Time now = Now();
  if (!known) {
    node.record.set_name(req.node_name());
    *node.record.mutable_registered_at() = ToProtoTime(now);
    node.orders_version = static_cast<uint64_t>(absl::ToUnixMicros(now));
  }
  // A changed inventory replaces the old one; claims (running jobs) are left as they are.
  node.record.set_address(req.address());
  node.record.set_torchrun_path(req.torchrun_path());
  node.record.set_work_dir(req.work_dir());
  *node.record.mutable_labels() = req.labels();
  *node.record.mutable_inventory() = req.inventory();
  node.inventory = *std::move(inventory);
  node.session_id = NewSessionId();
  node.ready = true;
  node.last_heartbeat = now;
  node.applied_version = 0;
  if (auto s = store_->PutNode(node.record); !s.ok()) {
    spdlog::error("store write for node {} failed: {}", node.record.name(), std::string(s.message()));
  }
  ApplyProcessReports(node, req.processes(), /*registering=*/true);
  BumpOrders(node);
  work_pending_ = true;
  spdlog::info("node {} registered ({} devices, {} processes reported)", req.node_name(),
               node.inventory.devices.size(), req.processes_size());
  pb::RegisterResponse response;
  response.set_session_id(node.session_id);
  response.set_lease_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  // Three heartbeats per lease at least, so that one lost beat never makes a node NotReady.
  response.set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(std::min(options_.heartbeat_interval, options_.lease_ttl / 3)));
  response.set_orphan_grace_ms(absl::ToInt64Milliseconds(options_.orphan_grace));
  return response;
}

absl::Status ClusterState::Heartbeat(const pb::HeartbeatRequest& req) {
  std::optional<NodeInventory> inventory;
  if (req.has_inventory()) {
    auto parsed = FromProto(req.inventory());
    if (!parsed.ok()) return parsed.status();  // nothing applied: the old inventory stands
    inventory = *std::move(parsed);
  }
  absl::MutexLock lock(&mu_);
  if (auto s = CheckSessionLocked(req.node_name(), req.session_id()); !s.ok()) return s;
  NodeEntry& node = nodes_.at(req.node_name());
  if (inventory) {
    // Health, memory use and cards that vanished: running jobs are left alone, the scheduler
    // stops using unhealthy cards from the next cycle on.
    for (const auto& d : inventory->devices) {
      if (!d.healthy) spdlog::warn("node {}: {} unhealthy: {}", node.record.name(), d.id, d.health_message);
    }
    node.inventory = *std::move(inventory);
    // Utilisation and memory use change on every refresh: keep them in memory (metrics, `nodes`)
    // and go no further. Only a lasting change (cards, health, links, versions) is written to the
    // store and wakes the scheduler for a pass over the whole queue: placement reads nothing else.
    const bool lasting_change = !SameLastingInventory(node.record.inventory(), req.inventory());
    *node.record.mutable_inventory() = req.inventory();
    if (lasting_change) {
      if (auto s = store_->PutNode(node.record); !s.ok()) {
        spdlog::error("store write for node {} failed: {}", node.record.name(), std::string(s.message()));
      }
      work_pending_ = true;
      Changed();
    }
  }
  node.last_heartbeat = Now();
  node.applied_version = std::min(req.applied_orders_version(), node.orders_version);
  if (req.draining()) {
    // The agent is stopping with --on-stop finish: no new work, running jobs finish. A failed
    // store write is retried with the next heartbeat, which says the same.
    if (auto s = SetDrainedLocked(node, true, "by its agent, which is stopping and lets running jobs finish");
        !s.ok()) {
      spdlog::error("node {}: {}", node.record.name(), std::string(s.message()));
    }
  }
  ApplyProcessReports(node, req.processes(), /*registering=*/false);
  return absl::OkStatus();
}

void ClusterState::ExpireLeasesLocked() {
  const absl::Time now = Now();
  for (auto& [name, node] : nodes_) {
    const absl::Duration silent = now - node.last_heartbeat;
    if (silent <= options_.lease_ttl || (!node.ready && node.claims.empty())) continue;
    // Past the lease: no new work, and the agent must register again and report what still runs.
    // Its jobs keep their claims: the agent keeps them running through a control-plane outage.
    if (node.ready) {
      spdlog::warn("node {}: lease lapsed, now NotReady; its jobs count as running for {} more", name,
                   absl::FormatDuration(options_.orphan_grace));
    }
    node.ready = false;
    node.session_id.clear();
    // Past the orphan grace as well, the agent and its fence watchdog have stopped the processes
    // (they stop them at the grace after their last answer, which came before this node's last
    // heartbeat): only now may the jobs run elsewhere.
    if (silent <= options_.lease_ttl + options_.orphan_grace) continue;
    std::vector<JobGen> lost;
    for (const auto& [key, claim] : node.claims) {
      if (claim.desired) lost.push_back(key);
    }
    // Claims go with the node, except those of jobs whose failure the store did not take: they
    // keep the node in this loop, so the next tick tries again.
    std::set<JobGen> unstored;
    for (const auto& key : lost) {
      auto job = jobs_.find(key.first);
      if (job == jobs_.end() || job->second.job.generation() != key.second) continue;
      if (!FailOrRestart(job->second, job->second.job, kRestartNodeLost,
                         absl::StrCat("node ", name, " stopped renewing its lease"))
               .ok()) {
        unstored.insert(key);
      }
    }
    std::erase_if(node.claims, [&](const auto& claim) { return !unstored.contains(claim.first); });
    BumpOrders(node);
    work_pending_ = true;
  }
}

pb::Orders ClusterState::OrdersFor(const NodeEntry& node) const {
  pb::Orders orders;
  orders.set_version(node.orders_version);
  for (const auto& [key, claim] : node.claims) {
    if (!claim.desired) {
      auto* kill = orders.add_kills();
      kill->set_job_id(key.first);
      kill->set_generation(key.second);
      kill->set_reason(claim.kill_reason);
      continue;
    }
    const auto job = jobs_.find(key.first);
    if (job == jobs_.end()) continue;
    for (const auto& plan : job->second.job.launch_plan()) {
      if (plan.node() != node.record.name()) continue;
      auto* launch = orders.add_launches();
      launch->set_job_id(key.first);
      launch->set_generation(key.second);
      *launch->mutable_plan() = plan;
      for (const auto& d : claim.device_ids) launch->add_device_ids(d);
    }
  }
  return orders;
}

absl::StatusOr<std::optional<pb::Orders>> ClusterState::WaitOrders(const std::string& node_name,
                                                                   const std::string& session,
                                                                   uint64_t after_version,
                                                                   absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
    if (auto s = CheckSessionLocked(node_name, session); !s.ok()) return s;
    const NodeEntry& node = nodes_.at(node_name);
    if (node.orders_version > after_version) return std::optional<pb::Orders>(OrdersFor(node));
    if (Now() >= deadline) return std::optional<pb::Orders>();
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

absl::Status ClusterState::CheckLogPush(const std::string& node, const std::string& session,
                                        const std::string& job_id, uint64_t generation) const {
  absl::MutexLock lock(&mu_);
  if (auto s = CheckSessionLocked(node, session); !s.ok()) return s;
  auto job = jobs_.find(job_id);
  if (job == jobs_.end() || generation == 0 || generation > job->second.job.generation()) {
    // Distinct from the session's NOT_FOUND: the agent drops these logs instead of re-registering.
    return absl::FailedPreconditionError(absl::StrCat("no job ", job_id, " generation ", generation));
  }
  // Only a node the generation ran on may write its log: its claim (held until the agent stops
  // reporting the process, which is after its logs are pushed), or the current placement.
  // FAILED_PRECONDITION like an unknown job: the agent drops the bytes instead of retrying.
  bool placed = nodes_.at(node).claims.contains({job_id, generation});  // CheckSessionLocked found the node
  if (generation == job->second.job.generation()) {
    for (const auto& p : job->second.job.placement()) placed = placed || p.node() == node;
  }
  if (!placed) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node, " did not run job ", job_id, " generation ", generation));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Cluster views

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
