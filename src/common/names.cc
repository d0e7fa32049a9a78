#include "src/common/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace hetpool {

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-'; }

absl::Status CheckName(absl::string_view field, absl::string_view value, size_t max, bool required) {
  auto invalid = [&](absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
  };
  if (value.empty()) return required ? invalid("required") : absl::OkStatus();
  if (value.size() > max) return invalid(absl::StrCat("longer than ", max, " characters"));
  for (char c : value) {
    if (!IsNameChar(c)) return invalid(absl::StrCat("'", value, "' may only use letters, digits, '.', '_', '-'"));
  }
  return absl::OkStatus();
}

absl::Status CheckPathComponent(absl::string_view field, absl::string_view value, size_t max) {
  if (auto s = CheckName(field, value, max, /*required=*/true); !s.ok()) return s;
  if (value[0] == '.') return absl::InvalidArgumentError(absl::StrCat(field, ": may not start with '.'"));
  return absl::OkStatus();
}

absl::Status CheckImageReference(absl::string_view field, absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty image name"));
  if (value.size() > 255) return absl::InvalidArgumentError(absl::StrCat(field, ": longer than 255 characters"));
  if (value[0] == '-' || value[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", value, "' may not start with '-' or '/'"));
  }
  for (char c : value) {
    if (!IsNameChar(c) && c != '/' && c != ':' && c != '@') {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", value, "' is not an image name (letters, digits, '.', '_', '-', '/', ':', '@')"));
    }
  }
  return absl::OkStatus();
}

}  // namespace hetpool
