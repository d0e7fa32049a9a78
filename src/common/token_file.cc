#include "src/common/token_file.h"

#include <openssl/evp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/names.h"

namespace hetpool {

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view json_text) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!doc.is_object() || !doc.contains("tokens") || !doc["tokens"].is_array()) {
    return absl::InvalidArgumentError("expected {\"tokens\": [...]}");
  }
  TokenTable table;
  const auto& tokens = doc["tokens"];
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string where = absl::StrCat("tokens[", i, "]");
    const auto& t = tokens[i];
    if (!t.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected an object"));
    for (const auto& [key, value] : t.items()) {
      if (key != "user" && key != "group" && key != "role" && key != "sha256" && key != "comment" && key != "expires") {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown field '", key, "'"));
      }
      if (!value.is_string()) return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": expected a string"));
    }
    TokenEntry entry;
    entry.user = t.value("user", "");
    entry.group = t.value("group", "");
    if (auto s = CheckName(absl::StrCat(where, ".user"), entry.user, kMaxUserName, true); !s.ok()) return s;
    if (auto s = CheckName(absl::StrCat(where, ".group"), entry.group, kMaxUserName, false); !s.ok()) return s;
    auto role = ParseRole(t.value("role", ""));
    if (!role.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".", role.status().message()));
    entry.role = *role;
    if (t.contains("expires")) {
      absl::Time expires;
      std::string error;
      if (!absl::ParseTime(absl::RFC3339_full, t["expires"].get<std::string>(), &expires, &error)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".expires: expected an RFC 3339 time such as 2027-03-01T00:00:00Z (", error, ")"));
      }
      entry.expires = expires;
    }
    std::string hash = absl::AsciiStrToLower(t.value("sha256", ""));
    if (hash.size() != 64 || hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".sha256: expected 64 hex digits"));
    }
    if (!table.by_hash_.emplace(std::move(hash), std::move(entry)).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".sha256: the same token appears twice"));
    }
  }
  return table;
}

const TokenEntry* TokenTable::Find(absl::string_view token) const {
  auto it = by_hash_.find(Sha256Hex(token));
  return it == by_hash_.end() ? nullptr : &it->second;
}

}  // namespace hetpool
