#include "src/daemon/services/job_stream_sources.h"

#include "src/common/convert.h"
#include "src/daemon/logs/log_cursor.h"
#include "src/daemon/services/job_redaction.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

class Watch final : public JobStreamSource<pb::WatchJobResponse> {
 public:
  explicit Watch(Caller caller) : caller_(std::move(caller)) {}

  absl::StatusOr<Batch> Next(const pb::Job& job, uint64_t version) override {
    Batch batch;
    if (version <= seen_) return batch;
    seen_ = version;
    pb::WatchJobResponse update;
    if (job.events_size() > 0) *update.mutable_event() = job.events(job.events_size() - 1);
    *update.mutable_job() = job;
    RedactFor(caller_, *update.mutable_job());
    batch.last = IsTerminal(job.state());
    batch.messages.push_back(std::move(update));
    return batch;
  }
  bool polls() const override { return false; }

 private:
  const Caller caller_;
  uint64_t seen_ = 0;
};

class Logs final : public JobStreamSource<pb::LogChunk> {
 public:
  Logs(const LogStore* logs, pb::GetJobLogsRequest request) : cursor_(logs, std::move(request)) {}

  absl::StatusOr<Batch> Next(const pb::Job& job, uint64_t) override {
    auto pass = cursor_.Next(job);
    if (!pass.ok()) return pass.status();
    return Batch{std::move(pass->chunks), pass->done, pass->more};
  }
  bool polls() const override { return true; }  // logs grow with no change of the job

 private:
  LogCursor cursor_;
};

}  // namespace

std::unique_ptr<JobStreamSource<pb::WatchJobResponse>> WatchSource(Caller caller) {
  return std::make_unique<Watch>(std::move(caller));
}

std::unique_ptr<JobStreamSource<pb::LogChunk>> LogSource(const LogStore* logs, pb::GetJobLogsRequest request) {
  return std::make_unique<Logs>(logs, std::move(request));
}

}  // namespace hetpool::daemon
