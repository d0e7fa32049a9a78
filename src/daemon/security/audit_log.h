// The audit log: one JSON line per mutating call and per refused call (who, what, when, result),
// appended and flushed before the answer leaves, so what a caller was told is on disk.
//   {"time":"2026-11-30T00:12:03.123Z","caller":"alice","role":"user","peer":"ipv4:127.0.0.1:5120",
//    "method":"CancelJob","target":"job-000012","code":"OK","message":""}
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/daemon/security/access_policy.h"

namespace hetpool::daemon {

struct AuditRecord {
  absl::Time time;
  const Caller* caller = nullptr;  // null: the caller could not be identified
  std::string peer;
  std::string method;
  std::string target;
  absl::Status result;
};

class AuditLog {
 public:
  // Appends to `path` (created 0600 when missing).
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path);
  ~AuditLog();
  void Record(const AuditRecord& record);

 private:
  explicit AuditLog(std::FILE* file) : file_(file) {}
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
};

// One record as its JSON line (no newline).
std::string AuditLine(const AuditRecord& record);

}  // namespace hetpool::daemon
