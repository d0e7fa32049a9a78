// JobTable: every job the daemon knows, by id, with the counter watchers wait on, the submitting
// users' idempotency keys and the id sequence. It is the one place a job's state changes: Commit
// writes the next state to the Store and only then makes it the state in memory. Thread-free:
// ClusterState calls it under its lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hetpool/v1/job.pb.h"
#include "hetpool/v1/planner.pb.h"
#include "src/daemon/state/job_entry.h"
#include "src/daemon/state/state_observer.h"
#include "src/daemon/state/wakeups.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

// Idempotency keys are the submitting user's own: (user, request_id).
using RequestKey = std::pair<std::string, std::string>;

struct JobTableOptions {
  size_t max_events_per_job = 200;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  StateObserver* observer = nullptr;  // store write times, jobs that end or restart
};

class JobTable {
 public:
  JobTable(Store* store, Wakeups& wakeups, JobTableOptions options);

  // The stored jobs (JobEntry::FromStored); ids continue above every one of them and above
  // `highest_seq`.
  void Load(std::vector<JobEntry> jobs, uint64_t highest_seq);
  // Hears, under the state lock, each job whose version moved (the job streams, services/
  // job_streams.h: one hub for watches, one for logs); it must only take note. WatchJobs returns
  // the number UnwatchJobs takes.
  using JobListener = std::function<void(const std::string& job_id)>;
  int WatchJobs(JobListener listener) {
    job_listeners_.emplace(++last_listener_, std::move(listener));
    return last_listener_;
  }
  void UnwatchJobs(int listener) { job_listeners_.erase(listener); }

  JobEntry* Find(const std::string& id);
  const JobEntry* Find(const std::string& id) const;
  std::map<std::string, JobEntry>& entries() { return jobs_; }
  const std::map<std::string, JobEntry>& entries() const { return jobs_; }
  // The PENDING jobs, all of them (in submission order) or (`only`) those among these ids.
  std::vector<JobEntry*> Pending(const std::vector<std::string>* only);
  // Calls `f(const JobEntry&)` for each PENDING job in submission order. Both read an index kept
  // as states change (Load, Admit, Commit): a pass and a submission's quota check read the queue
  // without walking every live job (83,000 at a 250,000-job store, most of them finished).
  template <typename F>
  void ForEachPending(F&& f) const {
    for (const auto& [seq, entry] : pending_) f(static_cast<const JobEntry&>(*entry));
  }
  size_t pending_count() const { return pending_.size(); }
  // How many live jobs each (JobState, priority) has, kept as jobs come, change and go: what a
  // metrics scrape reads under the state lock, where counting 83,000 live jobs took 2.5-10 ms.
  const std::map<std::pair<int, int>, int64_t>& counts() const { return counts_; }

  // Stores `next` as the job's state, and only then makes it the state in memory (and tells
  // watchers). UNAVAILABLE, with nothing changed, when the store refuses it. `entry` is one of
  // this table's (Find, Pending, Admit).
  absl::Status Commit(JobEntry& entry, pb::Job next);
  // A change watchers should see that is not stored (why a job waits: recomputed every cycle).
  void Touch(JobEntry& entry);
  // Why a pending job waits (its reason, message and PendingReason, and an event `event`), shown
  // now and not stored: the job's next stored change carries it.
  void SayWhyWaiting(JobEntry& entry, const std::string& reason, const std::string& message, pb::PendingReason why,
                     const std::string& event);
  // Adds an event at the clock's time, keeping the first (submission) and the newest ones.
  void AddEvent(pb::Job& job, std::string reason, std::string message) const;
  absl::Time Now() const { return options_.clock(); }

  // --- Submission: NewJob, then WriteJobTimed (outside the lock), then Admit or Abandon.
  // The job a user's request id already named, or null.
  const pb::Job* ByRequest(const RequestKey& key) const;
  // Whether a submission with this key is being written now.
  bool InFlight(const RequestKey& key) const { return requests_in_flight_.contains(key); }
  // A PENDING job with the next id (a failed write burns it), not yet in the table.
  pb::Job NewJob(pb::JobSpec spec, const std::string& request_id, const pb::PlanRow* plan);
  // After the job was written (WriteJobTimed, outside the lock): a stored job enters the table;
  // either way its key is settled.
  const pb::Job& Admit(pb::Job job);
  void Abandon(const pb::Job& job);

  // Keeps the store's health and logs once when the store starts, and stops, refusing writes.
  void NoteStoreWrite(const absl::Status& written);
  bool store_healthy() const { return store_healthy_; }

  // One page of jobs in submission order (oldest first unless the request says newest),
  // filtered by state, user, labels and submission time; see ListJobsRequest for where a page
  // ends.
  absl::StatusOr<pb::ListJobsResponse> List(const pb::ListJobsRequest& request) const;
  // Jobs that started and had not ended by `since` (of `user` only, when set).
  std::vector<pb::Job> RunningSince(absl::Time since, const std::string& user) const;

  // Retention: finished jobs that ended before `before`, oldest submissions first, at most
  // `limit`, each with the version read; and dropping them from the table once the store has
  // archived them (written without the state lock): a job that changed since it was read stays.
  struct Retiring {
    pb::Job job;
    uint64_t version = 0;
  };
  std::vector<Retiring> FinishedBefore(absl::Time before, size_t limit) const;
  void Forget(const std::vector<Retiring>& jobs);

  // Jobs not finished that may be resized (spec.elastic_nnodes): a pass with none skips the
  // elastic stage's walk of every claim on every node (at 5,000 nodes, 25 ms a pass).
  size_t live_elastic() const { return live_elastic_.size(); }

  // --- Job arrays (job_table_arrays.cc). An array (spec.array) is stored once and never queued
  // itself; its tasks are jobs of their own ("job-000042.17"), released to the queue as room
  // allows, and the array ends, stored once more, when every task has.
  // Releases tasks of every live array, lowest indices first, each stored as a PENDING job before
  // it is queued: while the array has fewer than max_running tasks not ended, and fewer than
  // kMaxWaitingTasks waiting in the queue. Ends arrays whose tasks have all ended. Returns the
  // ids released.
  std::vector<std::string> ReleaseArrayTasks();
  // Cancelling one task that was not released yet: it is released already CANCELLED. NOT_FOUND
  // when `id` names no such task of a live array.
  absl::StatusOr<JobEntry*> ReleaseCancelled(const std::string& id, const std::string& message);
  // The released tasks of array `id` that have not ended.
  std::vector<JobEntry*> LiveTasksOf(const std::string& id);
  // When `job` is an array: its tasks by state (Job.array_tasks) and the state it reads as.
  void ShowArray(pb::Job& job) const;
  // The job as callers read it: a copy of `entry`, an array's tasks shown (ShowArray).
  pb::Job Shown(const JobEntry& entry) const {
    pb::Job job = entry.Copy();
    ShowArray(job);
    return job;
  }
  static constexpr int kMaxWaitingTasks = 1024;

 private:
  // What the table knows of an array's tasks, kept as they are released and change state.
  struct ArrayProgress {
    std::vector<bool> released;   // by index
    std::map<int, int> by_state;  // JobState -> released tasks in it
    int Count(pb::JobState s) const {
      auto it = by_state.find(s);
      return it == by_state.end() ? 0 : it->second;
    }
  };
  // The state `entry` reads as: a live array's from its tasks (ShowArray), else its own.
  pb::JobState ShownState(const JobEntry& entry) const;
  // Notes a task entering the table (Load, Admit): its index is released.
  void NoteTask(const JobEntry& entry);
  // Stores the array's end once every task has ended; false when it has not (or the write failed).
  void EndArrayIfDone(const std::string& array_id);
  // The task `index` of `array`, in `state`, with the next sequence number.
  pb::Job TaskOf(const pb::Job& array, int index, pb::JobState state);
  // Stores `task` and enters it in the table; false (logged) when the store refuses it.
  bool StoreTask(pb::Job task);
  std::map<std::string, ArrayProgress> arrays_;  // by array id
  std::set<std::string> live_arrays_;            // arrays not ended; IndexState keeps it

  // Files the entry under pending_ and live_elastic_ or takes it out, as its state now says.
  void IndexState(JobEntry& entry);
  // Counts the entry under its state and priority (`by` +1), or stops counting it (-1).
  void Count(const JobEntry& entry, int by);

  Store* const store_;
  Wakeups& wakeups_;
  const JobTableOptions options_;
  std::map<int, JobListener> job_listeners_;
  int last_listener_ = 0;
  // Takes the id from the entry's summary: job() would parse a job kept as its stored bytes.
  void JobMoved(const std::string& id) const {
    for (const auto& [n, listener] : job_listeners_) listener(id);
  }
  std::map<std::string, JobEntry> jobs_;
  // Submission order (submit_seq): a page starts where the last one ended, not at the start.
  std::map<uint64_t, const JobEntry*> by_seq_;
  std::map<uint64_t, JobEntry*> pending_;          // the PENDING jobs by submit_seq; IndexState keeps it
  std::set<std::string> live_elastic_;             // by id; IndexState keeps it
  std::map<std::pair<int, int>, int64_t> counts_;  // (state, priority) -> live jobs; Count keeps it
  std::map<RequestKey, std::string> job_by_request_;
  std::set<RequestKey> requests_in_flight_;
  uint64_t next_seq_ = 1;
  bool store_healthy_ = true;  // the last job write was stored
};

// Writes `job` to the store, timed for the observer (null: none). No lock needed.
absl::Status WriteJobTimed(Store* store, StateObserver* observer, const pb::Job& job);

// "job-000042.17": the array's id and the task's index; nullopt for a job of no array.
std::optional<std::pair<std::string, int>> ArrayTaskId(const std::string& id);

// The job's placement on `node`, or null.
pb::NodePlacement* PlacementOn(pb::Job& job, const std::string& node);
const pb::NodePlacement* PlacementOn(const pb::Job& job, const std::string& node);

bool IsActive(pb::JobState state);  // SCHEDULED or RUNNING: holds claims

}  // namespace hetpool::daemon
