// Job arrays in the job table: an array is stored once at submission and never queued; its
// tasks are released to the queue as jobs of their own, each stored before it is queued, as
// max_running and the queue's bound allow; the array ends, stored once more, with its last task.
// A restart tells which tasks were released by the tasks it loads (a task is not retired while
// its array is live), so none runs twice and none is lost.
#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/state/job_table.h"

namespace hetpool::daemon {

std::optional<std::pair<std::string, int>> ArrayTaskId(const std::string& id) {
  const size_t dot = id.rfind('.');
  if (dot == std::string::npos || dot == 0) return std::nullopt;
  int index = -1;
  if (!absl::SimpleAtoi(absl::string_view(id).substr(dot + 1), &index) || index < 0) return std::nullopt;
  return std::make_pair(id.substr(0, dot), index);
}

void JobTable::NoteTask(const JobEntry& entry) {
  const auto task = ArrayTaskId(entry.summary().id);
  if (!task) return;
  std::vector<bool>& released = arrays_[task->first].released;
  if (released.size() <= static_cast<size_t>(task->second)) released.resize(static_cast<size_t>(task->second) + 1);
  released[static_cast<size_t>(task->second)] = true;
}

pb::Job JobTable::TaskOf(const pb::Job& array, int index, pb::JobState state) {
  pb::Job task;
  const uint64_t seq = next_seq_++;  // in the queue's order after every job submitted before
  task.set_id(absl::StrCat(array.id(), ".", index));
  task.set_submit_seq(seq);
  *task.mutable_spec() = array.spec();
  task.mutable_spec()->clear_array();
  if (array.has_plan()) *task.mutable_plan() = array.plan();
  task.set_state(state);
  *task.mutable_created_at() = ToProtoTime(Now());
  pb::ArrayTask* of = task.mutable_array_task();
  of->set_array(array.id());
  of->set_index(index);
  of->set_count(array.spec().array().count());
  AddEvent(task, "Submitted", absl::StrCat("task ", index, " of array ", array.id(), " by ", array.spec().user()));
  return task;
}

bool JobTable::StoreTask(pb::Job task) {
  const std::string array_id = task.array_task().array();
  const absl::Status written = WriteJobTimed(store_, options_.observer, task);
  NoteStoreWrite(written);
  if (!written.ok()) {
    spdlog::warn("{}: not released, the store refused it: {}", task.id(), std::string(written.message()));
    return false;
  }
  Admit(std::move(task));
  if (JobEntry* array = Find(array_id)) Touch(*array);
  return true;
}

std::vector<std::string> JobTable::ReleaseArrayTasks() {
  std::vector<std::string> released_ids;
  const std::vector<std::string> live(live_arrays_.begin(), live_arrays_.end());  // an end changes the set
  for (const std::string& id : live) {
    JobEntry* entry = Find(id);
    if (entry == nullptr) continue;
    const pb::Job& array = entry->job();
    const int count = array.spec().array().count();
    const ArrayProgress& progress = arrays_[id];
    const int released = static_cast<int>(std::count(progress.released.begin(), progress.released.end(), true));
    const int waiting = progress.Count(pb::JOB_STATE_PENDING);
    const int active = progress.Count(pb::JOB_STATE_SCHEDULED) + progress.Count(pb::JOB_STATE_RUNNING);
    int room = std::min(count - released, kMaxWaitingTasks - waiting);
    if (const int max_running = array.spec().array().max_running(); max_running > 0) {
      room = std::min(room, max_running - active - waiting);
    }
    for (int index = 0; index < count && room > 0; ++index) {
      if (static_cast<size_t>(index) < progress.released.size() && progress.released[static_cast<size_t>(index)]) {
        continue;
      }
      pb::Job task = TaskOf(array, index, pb::JOB_STATE_PENDING);
      const std::string task_id = task.id();
      if (!StoreTask(std::move(task))) return released_ids;  // the store refuses: again next pass
      released_ids.push_back(task_id);
      --room;
    }
    // Ended here too when the last task's end was stored but the array's write failed then.
    EndArrayIfDone(id);
  }
  return released_ids;
}

absl::StatusOr<JobEntry*> JobTable::ReleaseCancelled(const std::string& id, const std::string& message) {
  const auto task = ArrayTaskId(id);
  JobEntry* array = task ? Find(task->first) : nullptr;
  if (array == nullptr || !live_arrays_.contains(task->first) || task->second >= array->job().spec().array().count()) {
    return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  }
  pb::Job cancelled = TaskOf(array->job(), task->second, pb::JOB_STATE_CANCELLED);
  cancelled.set_reason("Cancelled");
  cancelled.set_message(message);
  *cancelled.mutable_finished_at() = ToProtoTime(Now());
  AddEvent(cancelled, "Cancelled", message);
  if (!StoreTask(std::move(cancelled))) {
    return absl::UnavailableError(absl::StrCat("the store refused the cancel of ", id, "; nothing was changed"));
  }
  EndArrayIfDone(task->first);
  return Find(id);
}

std::vector<JobEntry*> JobTable::LiveTasksOf(const std::string& id) {
  std::vector<JobEntry*> live;
  const std::string prefix = id + ".";
  for (auto it = jobs_.lower_bound(prefix); it != jobs_.end() && it->first.starts_with(prefix); ++it) {
    if (!IsTerminal(it->second.summary().state) && ArrayTaskId(it->first)) live.push_back(&it->second);
  }
  return live;
}

void JobTable::EndArrayIfDone(const std::string& array_id) {
  JobEntry* entry = Find(array_id);
  if (entry == nullptr || IsTerminal(entry->summary().state)) return;
  const int count = entry->job().spec().array().count();
  const ArrayProgress& progress = arrays_[array_id];
  const int succeeded = progress.Count(pb::JOB_STATE_SUCCEEDED), failed = progress.Count(pb::JOB_STATE_FAILED),
            cancelled = progress.Count(pb::JOB_STATE_CANCELLED);
  if (succeeded + failed + cancelled < count) return;
  pb::Job next = entry->job();
  const std::string tally =
      absl::StrCat(count, " tasks: ", succeeded, " succeeded, ", failed, " failed, ", cancelled, " cancelled");
  if (failed > 0) {
    // The array fails as its first failed task did (wait exits with that class).
    for (int index = 0; index < count; ++index) {
      const JobEntry* task = Find(absl::StrCat(array_id, ".", index));
      if (task == nullptr || task->summary().state != pb::JOB_STATE_FAILED) continue;
      pb::Job scratch;
      const pb::Job& failure = task->Read(scratch);
      *next.mutable_failure() = failure.failure();
      next.set_failure_origin(failure.failure_origin());
      next.set_reason(failure.reason());
      next.set_message(absl::StrCat(tally, "; the first to fail, ", failure.id(), ": ", failure.message()));
      break;
    }
    next.set_state(pb::JOB_STATE_FAILED);
  } else {
    next.set_state(cancelled > 0 ? pb::JOB_STATE_CANCELLED : pb::JOB_STATE_SUCCEEDED);
    next.set_reason(cancelled > 0 ? "Cancelled" : "Completed");
    next.set_message(tally);
  }
  *next.mutable_finished_at() = ToProtoTime(Now());
  AddEvent(next, "ArrayEnded", tally);
  if (absl::Status s = Commit(*entry, std::move(next)); !s.ok()) {
    spdlog::warn("{}: its end is not stored yet: {}", array_id, std::string(s.message()));
  }
}

pb::JobState JobTable::ShownState(const JobEntry& entry) const {
  const pb::JobState state = entry.summary().state;
  if (IsTerminal(state) || !live_arrays_.contains(entry.summary().id)) return state;
  auto it = arrays_.find(entry.summary().id);
  if (it == arrays_.end()) return state;
  const ArrayProgress& p = it->second;
  // Running once a task has started, until the array ends.
  const int started = p.Count(pb::JOB_STATE_SCHEDULED) + p.Count(pb::JOB_STATE_RUNNING) +
                      p.Count(pb::JOB_STATE_SUCCEEDED) + p.Count(pb::JOB_STATE_FAILED) +
                      p.Count(pb::JOB_STATE_CANCELLED);
  return started > 0 ? pb::JOB_STATE_RUNNING : pb::JOB_STATE_PENDING;
}

void JobTable::ShowArray(pb::Job& job) const {
  if (!job.spec().has_array()) return;
  const int count = job.spec().array().count();
  pb::ArrayTasks& tasks = *job.mutable_array_tasks();
  tasks.set_count(count);
  auto it = arrays_.find(job.id());
  if (it == arrays_.end()) {
    tasks.set_waiting(IsTerminal(job.state()) ? 0 : count);
    return;
  }
  const ArrayProgress& p = it->second;
  const int released = static_cast<int>(std::count(p.released.begin(), p.released.end(), true));
  tasks.set_waiting(IsTerminal(job.state()) ? p.Count(pb::JOB_STATE_PENDING)
                                            : count - released + p.Count(pb::JOB_STATE_PENDING));
  tasks.set_running(p.Count(pb::JOB_STATE_SCHEDULED) + p.Count(pb::JOB_STATE_RUNNING));
  tasks.set_succeeded(p.Count(pb::JOB_STATE_SUCCEEDED));
  tasks.set_failed(p.Count(pb::JOB_STATE_FAILED));
  tasks.set_cancelled(p.Count(pb::JOB_STATE_CANCELLED));
  if (const auto found = jobs_.find(job.id()); found != jobs_.end()) job.set_state(ShownState(found->second));
}

}  // namespace hetpool::daemon
