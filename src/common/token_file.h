// Bearer tokens: the file hetpoold reads them from and `hetpoolctl admin token` writes, and the
// hash they are kept as. In common/: the daemon and the CLI read the one format.
//
// The file holds SHA-256 hashes only, so a leaked copy lets nobody in:
//   {"tokens": [{"user": "alice", "group": "vision", "role": "user", "sha256": "<64 hex digits>",
//                "expires": "2027-03-01T00:00:00Z"}]}
// `hetpoolctl admin token` makes a token and appends its entry. "expires" (RFC 3339, optional):
// from then on the token is refused, and the streams it opened end.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/common/role.h"

namespace hetpool {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

struct TokenEntry {
  std::string user;
  std::string group;
  Role role = Role::kViewer;
  std::optional<absl::Time> expires;  // none: never
};

class TokenTable {
 public:
  // INVALID_ARGUMENT naming the entry and field that is wrong; duplicate hashes are refused.
  static absl::StatusOr<TokenTable> Parse(absl::string_view json_text);
  // The entry for a presented token (hashed here), or nullptr.
  const TokenEntry* Find(absl::string_view token) const;
  size_t size() const { return by_hash_.size(); }

 private:
  std::map<std::string, TokenEntry, std::less<>> by_hash_;
};

}  // namespace hetpool
