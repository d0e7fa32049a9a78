// The roles a token gives (access_policy.h says what each may do): in common/ because the token
// file (token_file.h) names them, and the CLI writes that file.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hetpool {

enum class Role { kViewer = 0, kUser = 1, kOperator = 2, kAdmin = 3 };

absl::string_view RoleName(Role role);
absl::StatusOr<Role> ParseRole(absl::string_view name);

}  // namespace hetpool
