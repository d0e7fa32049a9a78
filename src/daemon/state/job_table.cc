#include "src/daemon/state/job_table.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"

namespace hetpool::daemon {
namespace {
constexpr size_t kMaxListPageBytes = 3 << 20;
// However few jobs a filter matches, one call looks at no more than this many (a few ms under
// the state lock) before it answers with what it found and where to go on.
constexpr size_t kMaxJobsLookedAtPerPage = 20000;
}  // namespace

bool IsActive(pb::JobState state) { return state == pb::JOB_STATE_SCHEDULED || state == pb::JOB_STATE_RUNNING; }

const pb::NodePlacement* PlacementOn(const pb::Job& job, const std::string& node) {
  for (const auto& p : job.placement()) {
    if (p.node() == node) return &p;
  }
  return nullptr;
}

pb::NodePlacement* PlacementOn(pb::Job& job, const std::string& node) {
  return const_cast<pb::NodePlacement*>(PlacementOn(static_cast<const pb::Job&>(job), node));
}

JobTable::JobTable(Store* store, Wakeups& wakeups, JobTableOptions options)
    : store_(store), wakeups_(wakeups), options_(std::move(options)) {}

void JobTable::Load(std::vector<JobEntry> jobs, uint64_t highest_seq) {
  // Ids are never handed out twice: above every job loaded and every number the store recorded.
  next_seq_ = std::max<uint64_t>(next_seq_, highest_seq + 1);
  for (JobEntry& loaded : jobs) {
    const JobSummary& summary = loaded.summary();
    next_seq_ = std::max<uint64_t>(next_seq_, summary.submit_seq + 1);
    if (!summary.request_id.empty()) job_by_request_[{summary.user, summary.request_id}] = summary.id;
    auto [it, fresh] = jobs_.try_emplace(summary.id);
    JobEntry& entry = it->second;
    if (!fresh) Count(entry, -1);
    entry = std::move(loaded);
    by_seq_[entry.summary().submit_seq] = &entry;
    IndexState(entry);
    Count(entry, +1);
    NoteTask(entry);
  }
}

void JobTable::Count(const JobEntry& entry, int by) {
  const std::pair<int, int> key{entry.summary().state, entry.summary().priority};
  if ((counts_[key] += by) == 0) counts_.erase(key);
  if (const auto task = ArrayTaskId(entry.summary().id)) arrays_[task->first].by_state[entry.summary().state] += by;
}

void JobTable::IndexState(JobEntry& entry) {
  // An array is never queued itself: its tasks are (ReleaseArrayTasks).
  const bool live_array = !IsTerminal(entry.summary().state) && entry.job().spec().has_array();
  if (live_array) {
    live_arrays_.insert(entry.summary().id);
  } else {
    live_arrays_.erase(entry.summary().id);
  }
  if (entry.summary().state == pb::JOB_STATE_PENDING && !live_array) {
    pending_[entry.summary().submit_seq] = &entry;
  } else {
    pending_.erase(entry.summary().submit_seq);
  }
  // A finished job is not parsed for this (it may be kept as bytes); a live one is parsed.
  if (!IsTerminal(entry.summary().state) && entry.job().spec().has_elastic_nnodes()) {
    live_elastic_.insert(entry.summary().id);
  } else {
    live_elastic_.erase(entry.summary().id);
  }
}

JobEntry* JobTable::Find(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobEntry* JobTable::Find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<JobEntry*> JobTable::Pending(const std::vector<std::string>* only) {
  std::vector<JobEntry*> pending;
  if (only != nullptr) {
    for (const std::string& id : *only) {
      JobEntry* entry = Find(id);
      // The queue's own index says (an array, PENDING, is never in it: its tasks are).
      if (entry != nullptr && pending_.contains(entry->summary().submit_seq)) pending.push_back(entry);
    }
    return pending;
  }
  pending.reserve(pending_.size());
  for (const auto& [seq, entry] : pending_) pending.push_back(entry);
  return pending;
}

absl::Status WriteJobTimed(Store* store, StateObserver* observer, const pb::Job& job) {
  const absl::Time start = absl::Now();
  absl::Status s = store->PutJob(job);
  if (observer != nullptr) observer->StoreWrite(absl::Now() - start, s.ok());
  return s;
}

void JobTable::NoteStoreWrite(const absl::Status& written) {
  if (!written.ok() && store_healthy_) spdlog::error("the store refuses writes: {}", std::string(written.message()));
  if (written.ok() && !store_healthy_) spdlog::info("the store accepts writes again");
  store_healthy_ = written.ok();
}

absl::Status JobTable::Commit(JobEntry& entry, pb::Job next) {
  const absl::Status written = WriteJobTimed(store_, options_.observer, next);
  NoteStoreWrite(written);
  if (!written.ok()) {
    // Nothing changes in memory either: what is not stored is neither acknowledged nor acted
    // on. The caller fails its RPC, or leaves the agent's report to be applied again.
    return absl::UnavailableError(absl::StrCat("the store refused the change to job ", next.id(), " (",
                                               written.message(), "); nothing was changed"));
  }
  if (options_.observer != nullptr) {
    const pb::Job& job = next;
    const pb::Job& before = entry.job();
    if (IsTerminal(job.state()) && !IsTerminal(before.state())) options_.observer->JobEnded(job);
    if (job.restart_count() > before.restart_count() && job.events_size() > 0) {
      options_.observer->JobRestarted(job, job.events(job.events_size() - 1).reason());
    }
    if (job.preemption_count() > before.preemption_count()) {
      options_.observer->JobRestarted(job, job.last_preemption().defragmentation() ? kRestartMoved : kRestartPreempted);
    }
    if (job.resize_count() > before.resize_count()) options_.observer->JobRestarted(job, kRestartResized);
  }
  const bool was_terminal = IsTerminal(entry.summary().state);
  Count(entry, -1);
  entry.Replace(std::move(next));
  ++entry.version;
  IndexState(entry);
  Count(entry, +1);
  wakeups_.Changed();
  JobMoved(entry.summary().id);
  if (const auto task = ArrayTaskId(entry.summary().id)) {
    // The array reads its tasks' states: its watchers hear each change, and it ends with its last.
    if (JobEntry* array = Find(task->first)) Touch(*array);
    if (!was_terminal && IsTerminal(entry.summary().state)) EndArrayIfDone(task->first);
  }
  return absl::OkStatus();
}

void JobTable::Touch(JobEntry& entry) {
  ++entry.version;
  wakeups_.Changed();
  JobMoved(entry.summary().id);
}

void JobTable::SayWhyWaiting(JobEntry& entry, const std::string& reason, const std::string& message,
                             pb::PendingReason why, const std::string& event) {
  pb::Job& job = entry.mutable_job();
  job.set_reason(reason);
  job.set_message(message);
  *job.mutable_pending() = std::move(why);
  AddEvent(job, event, message);
  Touch(entry);
}

void JobTable::AddEvent(pb::Job& job, std::string reason, std::string message) const {
  if (!message.empty()) spdlog::info("job {}: {} {}", job.id(), reason, message);
  auto* event = job.add_events();
  *event->mutable_time() = ToProtoTime(Now());
  event->set_state(job.state());
  event->set_reason(std::move(reason));
  event->set_message(std::move(message));
  if (static_cast<size_t>(job.events_size()) > options_.max_events_per_job) {
    job.mutable_events()->DeleteSubrange(1, 1);
  }
}

const pb::Job* JobTable::ByRequest(const RequestKey& key) const {
  auto it = job_by_request_.find(key);
  if (it == job_by_request_.end()) return nullptr;
  const JobEntry* entry = Find(it->second);
  return entry == nullptr ? nullptr : &entry->job();
}

pb::Job JobTable::NewJob(pb::JobSpec spec, const std::string& request_id, const pb::PlanRow* plan) {
  const uint64_t seq = next_seq_++;  // a failed write burns its number
  pb::Job job;
  job.set_id(absl::StrFormat("job-%06d", seq));
  job.set_submit_seq(seq);
  job.set_request_id(request_id);
  *job.mutable_spec() = std::move(spec);
  if (plan) *job.mutable_plan() = *plan;
  job.set_state(pb::JOB_STATE_PENDING);
  *job.mutable_created_at() = ToProtoTime(Now());
  AddEvent(job, "Submitted", absl::StrCat("by ", job.spec().user()));
  if (!request_id.empty()) requests_in_flight_.insert({job.spec().user(), request_id});
  return job;
}

const pb::Job& JobTable::Admit(pb::Job job) {
  const std::string id = job.id();
  if (!job.request_id().empty()) {
    const RequestKey key{job.spec().user(), job.request_id()};
    requests_in_flight_.erase(key);
    job_by_request_[key] = id;
  }
  auto [it, fresh] = jobs_.try_emplace(id);
  JobEntry& entry = it->second;
  if (!fresh) Count(entry, -1);
  entry = JobEntry(std::move(job));
  by_seq_[entry.summary().submit_seq] = &entry;
  IndexState(entry);
  Count(entry, +1);
  NoteTask(entry);
  wakeups_.Changed();
  return entry.job();
}

void JobTable::Abandon(const pb::Job& job) {
  if (!job.request_id().empty()) requests_in_flight_.erase({job.spec().user(), job.request_id()});
}

namespace {

// `shown`: the state the job reads as (an array's, from its tasks).
bool Matches(const JobSummary& job, const pb::ListJobsRequest& req, const std::set<int>& states, pb::JobState shown) {
  if (!states.empty() && !states.contains(shown)) return false;
  if (!req.user().empty() && job.user != req.user()) return false;
  for (const auto& [k, v] : req.labels()) {
    const std::string* value = job.Label(k);
    if (value == nullptr || *value != v) return false;
  }
  if (req.has_submitted_after() && job.created_at < FromProtoTime(req.submitted_after())) return false;
  if (req.has_submitted_before() && job.created_at >= FromProtoTime(req.submitted_before())) return false;
  return true;
}

}  // namespace

absl::StatusOr<pb::ListJobsResponse> JobTable::List(const pb::ListJobsRequest& req) const {
  if (req.page_size() < 0) return absl::InvalidArgumentError("page_size: must not be negative");
  const int page_size = req.page_size() == 0 ? 100 : std::min(req.page_size(), 1000);
  uint64_t from_seq = 0;  // where the previous page stopped: the first job this one looks at
  if (!req.page_token().empty() && !absl::SimpleAtoi(req.page_token(), &from_seq)) {
    return absl::InvalidArgumentError("page_token: not a token returned by ListJobs");
  }
  const std::set<int> states(req.states().begin(), req.states().end());
  pb::ListJobsResponse response;
  size_t bytes = 0;
  size_t looked_at = 0;
  // Walks submission order from the token on, in the request's direction, and stops at the
  // first job that would not fit the page (or at the bound on jobs looked at): the next page
  // starts at that job, so nothing is repeated or skipped.
  auto visit = [&](uint64_t seq, const JobEntry* entry) {
    if (looked_at == kMaxJobsLookedAtPerPage) {
      response.set_next_page_token(absl::StrCat(seq));
      return false;
    }
    ++looked_at;
    // An array is one line, in the state it reads as; its tasks are read one by one (get).
    if (ArrayTaskId(entry->summary().id)) return true;
    if (!Matches(entry->summary(), req, states, ShownState(*entry))) return true;
    const size_t job_bytes = entry->ByteSize();
    if (response.jobs_size() == page_size || (response.jobs_size() > 0 && bytes + job_bytes > kMaxListPageBytes)) {
      response.set_next_page_token(absl::StrCat(seq));
      return false;
    }
    bytes += job_bytes;
    pb::Job* listed = response.add_jobs();
    entry->CopyTo(*listed);
    ShowArray(*listed);
    return true;
  };
  if (req.newest_first()) {
    auto it = req.page_token().empty() ? by_seq_.end() : by_seq_.upper_bound(from_seq);
    while (it != by_seq_.begin()) {
      --it;
      if (!visit(it->first, it->second)) break;
    }
  } else {
    for (auto it = by_seq_.lower_bound(from_seq); it != by_seq_.end(); ++it) {
      if (!visit(it->first, it->second)) break;
    }
  }
  return response;
}

std::vector<pb::Job> JobTable::RunningSince(absl::Time since, const std::string& user) const {
  std::vector<pb::Job> out;
  for (const auto& [id, entry] : jobs_) {
    const JobSummary& job = entry.summary();
    if (!job.started_at) continue;
    if (job.finished_at && *job.finished_at < since) continue;
    if (!user.empty() && job.user != user) continue;
    entry.CopyTo(out.emplace_back());
  }
  return out;
}

std::vector<JobTable::Retiring> JobTable::FinishedBefore(absl::Time before, size_t limit) const {
  std::vector<Retiring> out;
  for (const auto& [seq, entry] : by_seq_) {
    if (out.size() >= limit) break;
    const JobSummary& job = entry->summary();
    if (!IsTerminal(job.state) || !job.finished_at) continue;
    // A task stays while its array is live: a restart tells the array's released tasks by them.
    if (const auto task = ArrayTaskId(job.id); task && live_arrays_.contains(task->first)) continue;
    if (*job.finished_at < before) {
      Retiring& retiring = out.emplace_back();
      entry->CopyTo(retiring.job);
      retiring.version = entry->version;
    }
  }
  return out;
}

void JobTable::Forget(const std::vector<Retiring>& retired) {
  for (const Retiring& r : retired) {
    auto it = jobs_.find(r.job.id());
    if (it == jobs_.end() || it->second.version != r.version) continue;
    by_seq_.erase(r.job.submit_seq());
    pending_.erase(r.job.submit_seq());  // a finished job is not there; kept exact all the same
    live_elastic_.erase(r.job.id());
    Count(it->second, -1);
    if (r.job.spec().has_array()) arrays_.erase(r.job.id());
    if (!r.job.request_id().empty()) job_by_request_.erase({r.job.spec().user(), r.job.request_id()});
    jobs_.erase(it);
  }
}

}  // namespace hetpool::daemon
