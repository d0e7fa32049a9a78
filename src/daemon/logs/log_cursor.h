// Where one GetJobLogs call has read to: each node stream's offset and line filter, and whether
// the pass after the job ended was made. Each pass reads what is new in every stream the request
// names (log_request.h) as the job stands; a call that does not follow makes one pass, a
// following one a pass each time it looks, and one more after the job ended (agents push a
// node's logs before reporting its exit, so that pass returns everything).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetpool/v1/job.pb.h"
#include "src/daemon/logs/log_filter.h"
#include "src/daemon/logs/log_store.h"

namespace hetpool::daemon {

class LogCursor {
 public:
  LogCursor(const LogStore* logs, hetpool::v1::GetJobLogsRequest request) : logs_(logs), request_(std::move(request)) {}

  struct Pass {
    std::vector<hetpool::v1::LogChunk> chunks;
    bool done = false;  // nothing more can come: the call ends once these are sent
    bool more = false;  // a pass stopped at its size: more is there now, for the next pass
  };
  // One pass as `job` stands, of 1 MiB at most (then `more`). NOT_FOUND for a generation the job never had or a log the
  // store lost; INVALID_ARGUMENT for a request naming what the job has not (LogStreamsFor).
  absl::StatusOr<Pass> Next(const hetpool::v1::Job& job);

 private:
  // A last line without a newline is still held back for its label: it ends with the call.
  void Finish(Pass& pass);

  const LogStore* const logs_;
  const hetpool::v1::GetJobLogsRequest request_;
  std::map<std::string, uint64_t> offsets_;
  std::map<std::string, LogFilter> filters_;
  bool final_pass_ = false;
};

}  // namespace hetpool::daemon
