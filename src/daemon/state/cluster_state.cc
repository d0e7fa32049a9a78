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
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {
namespace {

bool Active(pb::JobState state) {
  return state == pb::JOB_STATE_SCHEDULED || state == pb::JOB_STATE_RUNNING;
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
  const scheduler::PlacementRequest placement_request = ToPlacementRequest(spec);
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
      auto feasible = policy_->Place(placement_request, NodeViews(/*all_free=*/true));
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
  policy_->NoteSubmitted(placement_request);  // the mix Fgd weighs
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

}  // namespace hetpool::daemon
