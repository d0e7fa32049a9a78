#include "src/daemon/security/authenticator.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/common/flags.h"

namespace hetpool::daemon {
namespace {

constexpr absl::string_view kNodePrefix = "node:";
constexpr absl::Duration kRecheck = absl::Seconds(1);

absl::StatusOr<absl::Time> ModifiedAt(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  return absl::FromTimeT(st.st_mtim.tv_sec) + absl::Nanoseconds(st.st_mtim.tv_nsec);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Open(std::string token_file) {
  auto mtime = ModifiedAt(token_file);
  if (!mtime.ok()) return mtime.status();
  auto text = ReadTextFile(token_file);
  if (!text.ok()) return text.status();
  auto table = TokenTable::Parse(*text);
  if (!table.ok()) return absl::InvalidArgumentError(absl::StrCat(token_file, ": ", table.status().message()));
  std::unique_ptr<Authenticator> a(new Authenticator());
  a->path_ = std::move(token_file);
  absl::MutexLock lock(&a->mu_);
  a->table_ = *std::move(table);
  a->file_mtime_ = *mtime;
  a->checked_at_ = absl::Now();
  return a;
}

std::unique_ptr<Authenticator> Authenticator::Unchecked() {
  std::unique_ptr<Authenticator> a(new Authenticator());
  a->unchecked_ = true;
  return a;
}

void Authenticator::ReloadIfChanged() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now - checked_at_ < kRecheck) return;
  checked_at_ = now;
  auto mtime = ModifiedAt(path_);
  if (!mtime.ok() || *mtime == file_mtime_) return;
  auto text = ReadTextFile(path_);
  auto table = text.ok() ? TokenTable::Parse(*text) : absl::StatusOr<TokenTable>(text.status());
  file_mtime_ = *mtime;
  if (!table.ok()) {
    spdlog::error("token file {} changed but is not valid ({}); keeping the previous {} tokens", path_,
                  std::string(table.status().message()), table_.size());
    return;
  }
  table_ = *std::move(table);
  spdlog::info("token file {} reloaded: {} tokens", path_, table_.size());
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
    if (entry == nullptr) return absl::UnauthenticatedError("the bearer token is not known to this pool (revoked or mistyped)");
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
