#include "src/daemon/services/api_guard.h"

#include "absl/strings/str_cat.h"

namespace hetpool::daemon {

absl::StatusOr<Caller> ApiGuard::Identify(const grpc::ServerContextBase& ctx) const {
  std::optional<absl::string_view> authorization;
  const auto& metadata = ctx.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  std::vector<std::string> common_names;
  if (auto auth = ctx.auth_context(); auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const auto& cn : auth->FindPropertyValues("x509_common_name")) common_names.emplace_back(cn.data(), cn.size());
  }
  return authenticator_->Authenticate(authorization, common_names);
}

void ApiGuard::Audit(const grpc::ServerContextBase& ctx, const Caller* caller, absl::string_view method,
                     const std::string& target, const absl::Status& result) const {
  if (audit_ == nullptr) return;
  AuditRecord record;
  record.time = absl::Now();
  record.caller = caller;
  record.peer = ctx.peer();
  record.method = std::string(method);
  record.target = target;
  record.result = result;
  audit_->Record(record);
}

absl::Status CheckNodeIdentity(const Caller& caller, const std::string& node_name) {
  if (caller.unchecked || caller.node == node_name) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("the certificate of node ", caller.node, " may not act for node '", node_name, "'"));
}

}  // namespace hetpool::daemon
