// What the job streams send (job_streams.h): WatchJob's updates and GetJobLogs' chunks.
#pragma once

#include <memory>

#include "hetpool/v1/job.pb.h"
#include "src/daemon/logs/log_store.h"
#include "src/daemon/security/access_policy.h"
#include "src/daemon/services/job_streams.h"

namespace hetpool::daemon {

// WatchJob: at each change, the job as `caller` may see it (RedactFor) with its last event; the
// last once the job has ended.
std::unique_ptr<JobStreamSource<hetpool::v1::WatchJobResponse>> WatchSource(Caller caller);

// GetJobLogs: what is new in the logs the request names, at every look (LogCursor); one pass
// for a request that does not follow.
std::unique_ptr<JobStreamSource<hetpool::v1::LogChunk>> LogSource(const LogStore* logs,
                                                                  hetpool::v1::GetJobLogsRequest request);

}  // namespace hetpool::daemon
