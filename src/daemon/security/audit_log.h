// The audit log: one JSON line per mutating call and per refused call (who, what, when, result),
// appended and flushed before the answer leaves, so what a caller was told is on disk.
//   {"time":"2026-11-30T00:12:03.123Z","caller":"alice","role":"user","peer":"ipv4:127.0.0.1:5120",
//    "method":"CancelJob","target":"job-000012","code":"OK","message":""}
// Every field the caller chose is bounded (BoundedField: its head, its length and a digest), so a
// refused 8 MB name costs a line, not 8 MB; the file rotates past a size (audit.log.1 ... .N).
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

struct AuditLogOptions {
  uint64_t max_bytes = 100ull << 20;  // rotate once the file is this large
  int keep = 5;                       // rotated files kept: audit.log.1 (newest) ... audit.log.5
};

class AuditLog {
 public:
  // Appends to `path` (created 0600 when missing).
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path, AuditLogOptions options = {});
  ~AuditLog();
  void Record(const AuditRecord& record);

 private:
  AuditLog(std::string path, AuditLogOptions options) : path_(std::move(path)), options_(options) {}
  absl::Status OpenFileLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RotateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const AuditLogOptions options_;
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t size_ ABSL_GUARDED_BY(mu_) = 0;
};

// A caller-chosen field as it is audited: itself when short, else its first bytes, its length
// and its SHA-256, so two long values can still be told apart.
inline constexpr size_t kMaxAuditField = 256;
std::string BoundedField(absl::string_view value);

// One record as its JSON line (no newline).
std::string AuditLine(const AuditRecord& record);

// The highest job number the audit log at `path` (and its rotated files, up to `keep`) records
// a SubmitJob for that was answered OK: evidence of ids handed out that --recover keeps above
// when the store has lost them. 0 when there is none. Lines that do not parse are passed over.
uint64_t HighestSubmittedJobSeq(const std::string& path, int keep = 20);

}  // namespace hetpool::daemon
