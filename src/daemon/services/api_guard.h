// The door every RPC goes through: who calls (Authenticator), whether their role allows the
// action (access_policy), the audit log for mutating and refused calls, and the per-user
// submission rate limit. Services wrap each handler's body in Guarded().
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "src/common/grpc_status.h"
#include "src/daemon/security/access_policy.h"
#include "src/daemon/security/audit_log.h"
#include "src/daemon/security/authenticator.h"
#include "src/daemon/security/call_limiter.h"
#include "src/daemon/security/rate_limiter.h"
#include "src/daemon/services/call_observer.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

class ApiGuard {
 public:
  // `store`: what every answer waits to be on disk (Store::Sync). `audit`, `store` and `calls` may
  // be null (no audit log, nothing to flush, no call metrics).
  // `in_flight`: caps on calls and streams in flight (null: none).
  ApiGuard(std::unique_ptr<Authenticator> authenticator, std::unique_ptr<AuditLog> audit,
           std::unique_ptr<RateLimiter> submissions, Store* store = nullptr, CallObserver* calls = nullptr,
           std::unique_ptr<CallLimiter> in_flight = nullptr)
      : authenticator_(std::move(authenticator)),
        audit_(std::move(audit)),
        submissions_(std::move(submissions)),
        store_(store),
        calls_(calls),
        in_flight_(std::move(in_flight)) {}

  absl::StatusOr<Caller> Identify(const grpc::ServerContextBase& ctx) const;
  // A place for the call (`stream`: for the stream it opens) within the caps of call_limiter.h;
  // agents are not counted, and under --insecure (nobody identified) only the connection's cap
  // holds.
  absl::StatusOr<CallLimiter::Ticket> Admit(const Caller& caller, const grpc::ServerContextBase& ctx,
                                            bool stream) const {
    if (in_flight_ == nullptr || caller.is_agent()) return CallLimiter::Ticket();
    return in_flight_->Admit(caller.unchecked ? std::nullopt : std::optional<std::string>(caller.user), ctx.peer(),
                             stream);
  }
  // For a stream, again at each step, with the bearer token it came with (`authorization`, the
  // header): UNAUTHENTICATED once that token was revoked or expired (issue 60, item 8: `logs -f`
  // went on 14 s after `admin revoke`, and would have for as long as the job ran).
  absl::Status StillAuthenticated(absl::string_view authorization) const {
    absl::Status identified = authenticator_->Authenticate(authorization, {}).status();
    if (identified.ok()) return absl::OkStatus();
    return absl::UnauthenticatedError(absl::StrCat("this stream ends: ", identified.message()));
  }
  void Audit(const grpc::ServerContextBase& ctx, const Caller* caller, absl::string_view method,
             const std::string& target, const absl::Status& result) const;
  RateLimiter& submissions() const { return *submissions_; }
  // `result`, once every change the call made or read is on disk; else why it cannot be.
  absl::Status Durable(absl::Status result) const {
    if (store_ == nullptr) return result;
    absl::Status synced = store_->Sync();
    return synced.ok() ? result : synced;
  }
  void Answered(absl::string_view method, const absl::Status& result, absl::Time began) const {
    if (calls_ != nullptr) calls_->Call(method, result.code(), absl::Now() - began);
  }

 private:
  std::unique_ptr<Authenticator> authenticator_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<RateLimiter> submissions_;
  Store* store_;
  CallObserver* calls_;
  std::unique_ptr<CallLimiter> in_flight_;
};

// Identifies the caller, checks that their role allows `action` at all, runs `body(caller)` (which
// checks what depends on the object: a job's owner, an agent's node), waits until what it changed
// or read is on disk (Store::Sync: nothing is acknowledged before it is stored, and no answer
// shows what a crash of the machine could take back) and writes the audit record: for every
// refused call, and for successful ones when `audit_success` (mutating calls).
template <typename Body>
grpc::Status Guarded(const ApiGuard& guard, grpc::ServerContextBase* ctx, absl::string_view method, Action action,
                     const std::string& target, Body&& body, bool audit_success) {
  const absl::Time began = absl::Now();
  absl::StatusOr<Caller> caller = guard.Identify(*ctx);
  absl::Status result = caller.ok() ? Allow(*caller, action) : caller.status();
  absl::StatusOr<CallLimiter::Ticket> place = CallLimiter::Ticket();
  if (result.ok()) place = guard.Admit(*caller, *ctx, /*stream=*/false);
  if (result.ok() && !place.ok()) result = place.status();
  if (result.ok()) result = guard.Durable(body(*caller));
  if (audit_success || absl::IsUnauthenticated(result) || absl::IsPermissionDenied(result) ||
      (IsMutating(action) && !result.ok())) {
    guard.Audit(*ctx, caller.ok() ? &*caller : nullptr, method, target, result);
  }
  guard.Answered(method, result, began);
  return ToGrpcStatus(result);
}

template <typename Body>
grpc::Status Guarded(const ApiGuard& guard, grpc::ServerContextBase* ctx, absl::string_view method, Action action,
                     const std::string& target, Body&& body) {
  return Guarded(guard, ctx, method, action, target, std::forward<Body>(body), IsMutating(action));
}

// For the agent API: the caller's certificate must name the node the request is about.
absl::Status CheckNodeIdentity(const Caller& caller, const std::string& node_name);

}  // namespace hetpool::daemon
