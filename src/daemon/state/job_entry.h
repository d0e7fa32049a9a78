// JobEntry: one job as the daemon keeps it in memory. A job that can still change (pending,
// scheduled, running) is kept parsed; a finished one is kept as the bytes the store holds, with
// the few fields the job table indexes and filters on read out of them (JobSummary), and is
// parsed only when a caller needs the whole job. At a 250,000-job store, 83,000 jobs are live and
// nearly all of them finished: parsing each one's spec, launch plans and events at start was most
// of a restart's time before the first answer, one allocation per string and map entry.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hetpool/v1/job.pb.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

// What the job table reads of every job without parsing it: its identity, its state, who it
// belongs to, its labels and its times.
struct JobSummary {
  std::string id;
  uint64_t submit_seq = 0;
  pb::JobState state = pb::JOB_STATE_UNSPECIFIED;
  std::string request_id;
  std::string user;
  std::string group;
  int32_t priority = 0;
  std::vector<std::pair<std::string, std::string>> labels;  // one entry per key
  absl::Time created_at = absl::UnixEpoch();
  std::optional<absl::Time> started_at;
  std::optional<absl::Time> finished_at;

  // The label's value, or null.
  const std::string* Label(const std::string& key) const;
};

JobSummary SummaryOf(const pb::Job& job);
// The summary read from a stored job's wire format, skipping everything else; DATA_LOSS when
// the bytes are not a well-formed message. It agrees with SummaryOf(parsed) for every job.
absl::StatusOr<JobSummary> ReadJobSummary(absl::string_view stored);

class JobEntry {
 public:
  JobEntry() = default;
  explicit JobEntry(pb::Job job) { Set(std::move(job)); }
  // A stored job: kept as its bytes when it has finished, parsed otherwise. DATA_LOSS naming
  // the row when it is not a job.
  static absl::StatusOr<JobEntry> FromStored(StoredRow& row);

  const JobSummary& summary() const { return summary_; }
  // The whole job. A finished job kept as bytes is parsed here, once, and kept parsed. Callers
  // hold the state lock (the parse writes the entry).
  const pb::Job& job() const {
    if (job_ == nullptr) Parse();  // inline: a pass reads job() of every queued job many times
    return *job_;
  }
  // For what is neither stored nor indexed: why a pending job waits, its hold on cards. Every
  // other change goes through Replace (JobTable::Commit), which stores it first.
  pb::Job& mutable_job() {
    if (job_ == nullptr) Parse();
    return *job_;
  }
  // The job, copied into `out`; a job kept as bytes is parsed into `out` and stays bytes here
  // (a `list` page of finished jobs leaves the table as small as it found it).
  void CopyTo(pb::Job& out) const;
  // The whole job without parsing it into the entry: the entry's own when it is parsed, else
  // `scratch`, filled (a reader of a job that may have ended: claims released, a log push).
  const pb::Job& Read(pb::Job& scratch) const {
    if (job_ != nullptr) return *job_;
    CopyTo(scratch);
    return scratch;
  }
  pb::Job Copy() const {
    pb::Job out;
    CopyTo(out);
    return out;
  }
  // The job's size on the wire (a `list` page's bound).
  size_t ByteSize() const;
  // Makes `next` the job. A finished job is kept as its bytes (serialized again: the store's
  // copy is not at hand), so a pool's memory grows with its active jobs, not its history.
  void Replace(pb::Job next);
  bool kept_as_bytes() const { return job_ == nullptr; }

  uint64_t version = 1;  // passes WaitJob's `after_version` on every visible change

 private:
  void Set(pb::Job job);
  // Parses `stored_` into `job_` and lets the bytes go. A record that scanned at load but does
  // not parse (damaged inside a field) is logged and answered with the fields its summary has
  // and a message that says so: the job is never dropped nor does the daemon stop on it.
  void Parse() const;

  JobSummary summary_;
  // The parsed job, or null while it is kept as `stored_` (a pointer: an entry kept as bytes is
  // half the size, and a restart allocates and touches 83,000 of them).
  mutable std::unique_ptr<pb::Job> job_;
  mutable std::string stored_;  // the stored bytes of a finished job not parsed yet
};

// The rows of Store::LoadJobRows as entries, decoded on several threads (DecodeRows); DATA_LOSS
// naming the first row that is not a job.
absl::StatusOr<std::vector<JobEntry>> DecodeStoredJobs(std::vector<StoredRow> rows);

}  // namespace hetpool::daemon
