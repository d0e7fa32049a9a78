// `hetpoolctl admin`: local administration that needs no daemon. `token` makes a bearer token
// and appends its hash to a token file; `revoke` removes a user's tokens. hetpoold re-reads the
// file when it changes.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/cli/command.h"
#include "src/common/durable_file.h"
#include "src/common/token_file.h"

namespace hetpool::cli {
namespace {

absl::StatusOr<nlohmann::json> ReadTokenFile(const std::string& path) {
  if (!std::filesystem::exists(path)) return nlohmann::json{{"tokens", nlohmann::json::array()}};
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  if (auto table = hetpool::TokenTable::Parse(*text); !table.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", table.status().message()));
  }
  return nlohmann::json::parse(*text, nullptr, false);
}

// Written whole to a private temporary file, then renamed: hetpoold never reads half a file.
absl::Status WriteTokenFile(const std::string& path, const nlohmann::json& doc) {
  return ReplaceFileDurably(path, doc.dump(2) + "\n");
}

absl::StatusOr<std::string> NewToken() {
  unsigned char bytes[32];
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof(bytes)))
    return absl::InternalError("/dev/urandom unreadable");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token = "hp_";
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

struct TokenOptions {
  std::string file, user, group, role = "user", comment, expires;
};

// "--expires 30d" / "12h" / "90m": when from now; days as well as absl's units.
absl::StatusOr<absl::Time> ExpiryFrom(const std::string& text, absl::Time now) {
  int64_t days = 0;
  if (absl::EndsWith(text, "d") && absl::SimpleAtoi(text.substr(0, text.size() - 1), &days) && days > 0) {
    return now + absl::Hours(24 * days);
  }
  absl::Duration d;
  if (absl::ParseDuration(text, &d) && d > absl::ZeroDuration()) return now + d;
  return absl::InvalidArgumentError(
      absl::StrCat("--expires '", text, "': expected a duration such as 30d, 12h or 90m"));
}

void DeclareToken(FlagSet& flags, TokenOptions* o) {
  flags.String("file", &o->file, "the token file hetpoold --tokens reads");
  flags.CompleteAs("file", ValueCompletion::kFile);
  flags.String("user", &o->user, "who the token identifies");
  flags.String("group", &o->group, "the user's group (group quotas)");
  flags.String("role", &o->role, "what the token may do (default: user)");
  flags.Values("role", {"viewer", "user", "operator", "admin"});
  flags.String("comment", &o->comment, "a note kept with the entry");
  flags.String("expires", &o->expires, "the token is refused after this long (30d, 12h; default: never)");
}

int Token(Client&, const Invocation& in, const TokenOptions& o) {
  const std::string& file = o.file;
  const std::string& user = o.user;
  const std::string& group = o.group;
  const std::string& role = o.role;
  const std::string& comment = o.comment;
  if (file.empty() || user.empty()) return in.Usage("admin token needs --file and --user");
  auto doc = ReadTokenFile(file);
  if (!doc.ok()) return Error(doc.status());
  auto token = NewToken();
  if (!token.ok()) return Error(token.status());
  nlohmann::json entry = {{"user", user}, {"role", role}, {"sha256", hetpool::Sha256Hex(*token)}};
  if (!group.empty()) entry["group"] = group;
  if (!comment.empty()) entry["comment"] = comment;
  if (!o.expires.empty()) {
    auto expires = ExpiryFrom(o.expires, absl::Now());
    if (!expires.ok()) return in.Usage(std::string(expires.status().message()));
    entry["expires"] = absl::FormatTime(absl::RFC3339_sec, *expires, absl::UTCTimeZone());
  }
  (*doc)["tokens"].push_back(entry);
  // The same checks hetpoold makes, before anything is written.
  if (auto table = hetpool::TokenTable::Parse(doc->dump()); !table.ok()) return Error(table.status());
  if (auto s = WriteTokenFile(file, *doc); !s.ok()) return Error(s);
  std::cout << *token << "\n";
  return 0;
}

struct RevokeOptions {
  std::string file, user;
};

void DeclareRevoke(FlagSet& flags, RevokeOptions* o) {
  flags.String("file", &o->file, "the token file hetpoold --tokens reads");
  flags.CompleteAs("file", ValueCompletion::kFile);
  flags.String("user", &o->user, "whose tokens to remove");
}

int Revoke(Client&, const Invocation& in, const RevokeOptions& o) {
  const std::string& file = o.file;
  const std::string& user = o.user;
  if (file.empty() || user.empty()) return in.Usage("admin revoke needs --file and --user");
  auto doc = ReadTokenFile(file);
  if (!doc.ok()) return Error(doc.status());
  nlohmann::json kept = nlohmann::json::array();
  size_t removed = 0;
  for (const auto& entry : (*doc)["tokens"]) {
    if (entry.value("user", "") == user) {
      ++removed;
    } else {
      kept.push_back(entry);
    }
  }
  if (removed == 0) return Error(absl::NotFoundError(absl::StrCat(file, " has no token of ", user)));
  (*doc)["tokens"] = kept;
  if (auto s = WriteTokenFile(file, *doc); !s.ok()) return Error(s);
  std::cout << "revoked " << removed << " token(s) of " << user << "\n";
  return 0;
}

}  // namespace

std::vector<CommandEntry> AdminCommands() {
  return {
      {.name = "admin token",
       .synopsis = "--file FILE --user NAME",
       .summary = "print a new bearer token; its SHA-256 goes into the daemon's --tokens file (created 0600)",
       .examples = {"hetpoolctl admin token --file /etc/hetpool/tokens.json --user ci-bot --group infra --role user"},
       .make = Make<TokenOptions>(DeclareToken, Token)},
      {.name = "admin revoke",
       .synopsis = "--file FILE --user NAME",
       .summary = "remove every token of a user; hetpoold stops accepting them within a second or two",
       .examples = {"hetpoolctl admin revoke --file /etc/hetpool/tokens.json --user alice"},
       .make = Make<RevokeOptions>(DeclareRevoke, Revoke)},
  };
}

}  // namespace hetpool::cli
