#include "src/daemon/security/authenticator.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/common/watched_file.h"

namespace hetpool::daemon {
namespace {

constexpr absl::string_view kNodePrefix = "node:";
constexpr absl::Duration kRecheck = absl::Seconds(1);

}  // namespace

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Open(std::string token_file,
                                                                   std::function<absl::Time()> clock) {
  auto file = WatchedFile::Open(std::move(token_file), kRecheck);
  if (!file.ok()) return file.status();
  auto table = TokenTable::Parse(file->text());
  if (!table.ok()) return absl::InvalidArgumentError(absl::StrCat(file->path(), ": ", table.status().message()));
  std::unique_ptr<Authenticator> a(new Authenticator());
  a->clock_ = std::move(clock);
  absl::MutexLock lock(&a->mu_);
  a->file_ = *std::move(file);
  a->table_ = *std::move(table);
  return a;
}

std::unique_ptr<Authenticator> Authenticator::Unchecked() {
  std::unique_ptr<Authenticator> a(new Authenticator());
  a->unchecked_ = true;
  return a;
}

void Authenticator::ReloadIfChanged() const {
  absl::MutexLock lock(&mu_);
  const auto text = file_->Changed(clock_());
  if (!text) return;
  auto table = TokenTable::Parse(*text);
  if (!table.ok()) {
    spdlog::error("token file {} changed but is not valid ({}); keeping the previous {} tokens", file_->path(),
                  std::string(table.status().message()), table_.size());
    return;
  }
  table_ = *std::move(table);
  spdlog::info("token file {} reloaded: {} tokens", file_->path(), table_.size());
}

absl::StatusOr<Caller> Authenticator::Authenticate(std::optional<absl::string_view> authorization,
                                                   const std::vector<std::string>& cert_common_names) const {
  Caller caller;
  if (unchecked_) {
    caller.unchecked = true;
    return caller;
  }
  if (authorization.has_value()) {
    absl::string_view value = *authorization;
    if (!absl::ConsumePrefix(&value, "Bearer ") || value.empty()) {
      return absl::UnauthenticatedError("authorization: expected 'Bearer <token>'");
    }
    ReloadIfChanged();
    absl::MutexLock lock(&mu_);
    const TokenEntry* entry = table_.Find(value);
    if (entry == nullptr)
      return absl::UnauthenticatedError("the bearer token is not known to this pool (revoked or mistyped)");
    // Expiry is a date on the calendar: the wall clock's to say.
    if (entry->expires && absl::Now() >= *entry->expires) {
      return absl::UnauthenticatedError(
          absl::StrCat("the bearer token of ", entry->user, " expired at ",
                       absl::FormatTime(absl::RFC3339_sec, *entry->expires, absl::UTCTimeZone()),
                       "; ask an administrator for a new one"));
    }
    caller.user = entry->user;
    caller.group = entry->group;
    caller.role = entry->role;
    return caller;
  }
  for (const std::string& cn : cert_common_names) {
    absl::string_view name = cn;
    if (absl::ConsumePrefix(&name, kNodePrefix) && !name.empty()) {
      caller.node = std::string(name);
      return caller;
    }
  }
  return absl::UnauthenticatedError(
      "no credentials: pass a bearer token (hetpoolctl --token or HETPOOL_TOKEN; other clients send the "
      "metadata header 'authorization: Bearer <token>'); agents present a node certificate");
}

}  // namespace hetpool::daemon
