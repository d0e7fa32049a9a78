#include "src/daemon/security/audit_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace hetpool::daemon {

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("audit log ", path, ": ", std::strerror(errno)));
  std::FILE* file = fdopen(fd, "a");
  if (file == nullptr) {
    close(fd);
    return absl::InternalError(absl::StrCat("audit log ", path, ": fdopen failed"));
  }
  return std::unique_ptr<AuditLog>(new AuditLog(file));
}

AuditLog::~AuditLog() {
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

std::string AuditLine(const AuditRecord& r) {
  nlohmann::json line;
  line["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", r.time, absl::UTCTimeZone());
  if (r.caller == nullptr) {
    line["caller"] = nullptr;
  } else if (r.caller->is_agent()) {
    line["caller"] = absl::StrCat("node:", r.caller->node);
  } else {
    line["caller"] = r.caller->unchecked ? "anonymous" : r.caller->user;
    if (!r.caller->unchecked) line["role"] = std::string(RoleName(r.caller->role));
  }
  line["peer"] = r.peer;
  line["method"] = r.method;
  line["target"] = r.target;
  line["code"] = absl::StatusCodeToString(r.result.code());
  line["message"] = std::string(r.result.message());
  // Request fields are the caller's bytes: never let them break the JSON.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AuditLog::Record(const AuditRecord& record) {
  const std::string line = AuditLine(record) + "\n";
  absl::MutexLock lock(&mu_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace hetpool::daemon
