#include "src/daemon/security/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "src/common/token_file.h"

namespace hetpool::daemon {

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path, AuditLogOptions options) {
  std::unique_ptr<AuditLog> log(new AuditLog(path, options));
  absl::MutexLock lock(&log->mu_);
  if (auto s = log->OpenFileLocked(); !s.ok()) return s;
  return log;
}

absl::Status AuditLog::OpenFileLocked() {
  const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("audit log ", path_, ": ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || fchmod(fd, 0600) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("audit log ", path_, ": ", error));
  }
  std::FILE* file = fdopen(fd, "a");
  if (file == nullptr) {
    close(fd);
    return absl::InternalError(absl::StrCat("audit log ", path_, ": fdopen failed"));
  }
  file_ = file;
  size_ = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

AuditLog::~AuditLog() {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) std::fclose(file_);
}

void AuditLog::RotateLocked() {
  // audit.log.N-1 -> audit.log.N ... audit.log -> audit.log.1; the oldest is overwritten.
  for (int i = options_.keep - 1; i >= 1; --i) {
    std::rename(absl::StrCat(path_, ".", i).c_str(), absl::StrCat(path_, ".", i + 1).c_str());
  }
  std::fclose(file_);
  file_ = nullptr;
  if (options_.keep >= 1) {
    std::rename(path_.c_str(), absl::StrCat(path_, ".1").c_str());
  } else {
    unlink(path_.c_str());
  }
  if (auto s = OpenFileLocked(); !s.ok()) {
    spdlog::error("audit log: cannot reopen after rotation: {}", std::string(s.message()));
  }
}

std::string BoundedField(absl::string_view value) {
  if (value.size() <= kMaxAuditField) return std::string(value);
  return absl::StrCat(value.substr(0, 64), "...(", value.size(), " bytes, sha256 ", Sha256Hex(value), ")");
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
  line["peer"] = BoundedField(r.peer);
  line["method"] = BoundedField(r.method);
  line["target"] = BoundedField(r.target);
  line["code"] = absl::StatusCodeToString(r.result.code());
  // Error messages quote what was refused (a field's value): bounded like the fields themselves.
  line["message"] = BoundedField(r.result.message());
  // Request fields are the caller's bytes: never let them break the JSON.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AuditLog::Record(const AuditRecord& record) {
  const std::string line = AuditLine(record) + "\n";
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) {
    // A rotation failed to reopen: try again, and say so on the daemon's log if it still fails.
    if (auto s = OpenFileLocked(); !s.ok()) {
      spdlog::error("audit log: record lost: {}", std::string(s.message()));
      return;
    }
  }
  if (size_ > 0 && size_ + line.size() > options_.max_bytes) RotateLocked();
  if (file_ == nullptr) return;
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
  size_ += line.size();
}

uint64_t HighestSubmittedJobSeq(const std::string& path, int keep) {
  uint64_t highest = 0;
  for (int i = 0; i <= keep; ++i) {
    std::ifstream in(i == 0 ? path : absl::StrCat(path, ".", i));
    if (!in) continue;
    std::string line;
    while (std::getline(in, line)) {
      // Cheap test first: most lines are other calls.
      if (line.find("\"SubmitJob\"") == std::string::npos) continue;
      const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!record.is_object() || record.value("method", "") != "SubmitJob" || record.value("code", "") != "OK")
        continue;
      absl::string_view target;
      if (record.contains("target") && record["target"].is_string()) {
        target = record["target"].get_ref<const std::string&>();
      }
      uint64_t seq = 0;
      if (absl::ConsumePrefix(&target, "job-") && absl::SimpleAtoi(target, &seq)) highest = std::max(highest, seq);
    }
  }
  return highest;
}

}  // namespace hetpool::daemon
