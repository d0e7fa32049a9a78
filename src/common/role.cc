#include "src/common/role.h"

#include "absl/strings/str_cat.h"

namespace hetpool {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer: return "viewer";
    case Role::kUser: return "user";
    case Role::kOperator: return "operator";
    case Role::kAdmin: return "admin";
  }
  return "?";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role r : {Role::kViewer, Role::kUser, Role::kOperator, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat("role '", name, "': expected viewer, user, operator or admin"));
}

}  // namespace hetpool
