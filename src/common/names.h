// The one rule for names that travel between programs and end up in paths, accounts and labels:
// job names, users and groups (from tokens as well as from JobSpec), node names, label keys.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hetpool {

// Letters, digits, '.', '_' and '-'.
bool IsNameChar(char c);

// INVALID_ARGUMENT naming `field` when `value` is empty (and required), longer than `max`, or
// uses another character.
absl::Status CheckName(absl::string_view field, absl::string_view value, size_t max, bool required);

// Names that become one component of a path (job ids, node names): CheckName's rule, and no
// leading '.', so neither "." nor ".." nor a hidden entry can be made from one.
absl::Status CheckPathComponent(absl::string_view field, absl::string_view value, size_t max);

// A container image reference as runtimes take it ("registry.example:5000/team/torch:2.4-cu12",
// "localhost/x@sha256:..."): 1-255 of letters, digits and . _ - / : @, not starting with '-' (a
// runtime would read it as an option) or '/'. INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckImageReference(absl::string_view field, absl::string_view value);

// Users and groups: in tokens and in JobSpec alike.
inline constexpr size_t kMaxUserName = 64;

}  // namespace hetpool
