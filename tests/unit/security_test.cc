// The security modules without a network: the access table cell by cell, the token file, the
// authenticator (tokens, node certificates, reload), the audit line, the rate limiter with an
// injected clock, and quotas.
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/daemon/security/access_policy.h"
#include "src/daemon/security/audit_log.h"
#include "src/daemon/security/call_limiter.h"
#include "src/daemon/security/authenticator.h"
#include "src/daemon/security/quota.h"
#include "src/daemon/security/rate_limiter.h"
#include "src/common/token_file.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::daemon {
namespace {

Caller User(const std::string& name, Role role) {
  Caller c;
  c.user = name;
  c.role = role;
  return c;
}

// --- access policy: every role x action, on one's own job and on another's.
struct AccessCase {
  Role role;
  Action action;
  bool own_job;  // for job actions: the job is the caller's
  bool allowed;
};

class AccessPolicyTest : public ::testing::TestWithParam<AccessCase> {};

TEST_P(AccessPolicyTest, FollowsTheRoleTable) {
  const AccessCase& c = GetParam();
  const Caller caller = User("alice", c.role);
  const std::string owner = c.own_job ? "alice" : "bob";
  const bool job_action =
      c.action == Action::kReadJob || c.action == Action::kReadLogs || c.action == Action::kCancelJob;
  absl::Status s = Allow(caller, c.action, job_action ? &owner : nullptr);
  EXPECT_EQ(s.ok(), c.allowed) << RoleName(c.role) << " " << ActionName(c.action) << (c.own_job ? " own" : " other")
                               << ": " << s;
  if (!s.ok()) {
    EXPECT_TRUE(absl::IsPermissionDenied(s));
    EXPECT_TRUE(absl::StrContains(s.message(), "needs role")) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, AccessPolicyTest,
    ::testing::Values(
        // viewer: read-only, no logs, no cancel, no submit, no drain
        AccessCase{Role::kViewer, Action::kReadCluster, true, true},
        AccessCase{Role::kViewer, Action::kPlan, true, true}, AccessCase{Role::kViewer, Action::kListJobs, true, true},
        AccessCase{Role::kViewer, Action::kReadJob, false, true},
        AccessCase{Role::kViewer, Action::kReadLogs, true, false},
        AccessCase{Role::kViewer, Action::kSubmitJob, true, false},
        AccessCase{Role::kViewer, Action::kCancelJob, true, false},
        AccessCase{Role::kViewer, Action::kDrainNode, true, false},
        // user: own jobs only
        AccessCase{Role::kUser, Action::kSubmitJob, true, true}, AccessCase{Role::kUser, Action::kReadJob, true, true},
        AccessCase{Role::kUser, Action::kReadJob, false, false}, AccessCase{Role::kUser, Action::kReadLogs, true, true},
        AccessCase{Role::kUser, Action::kReadLogs, false, false},
        AccessCase{Role::kUser, Action::kCancelJob, true, true},
        AccessCase{Role::kUser, Action::kCancelJob, false, false},
        AccessCase{Role::kUser, Action::kDrainNode, true, false},
        AccessCase{Role::kUser, Action::kReadCluster, true, true},
        // operator: every job, nodes
        AccessCase{Role::kOperator, Action::kCancelJob, false, true},
        AccessCase{Role::kOperator, Action::kReadLogs, false, true},
        AccessCase{Role::kOperator, Action::kDrainNode, true, true},
        AccessCase{Role::kOperator, Action::kSubmitJob, true, true},
        // admin: everything
        AccessCase{Role::kAdmin, Action::kCancelJob, false, true},
        AccessCase{Role::kAdmin, Action::kDrainNode, true, true},
        AccessCase{Role::kAdmin, Action::kReadLogs, false, true}),
    [](const ::testing::TestParamInfo<AccessCase>& p) {
      std::string name = absl::StrCat(RoleName(p.param.role), "_", static_cast<int>(p.param.action),
                                      p.param.own_job ? "_own" : "_other");
      return name;
    });

TEST(AccessPolicy, AgentsAndUsersKeepToTheirOwnApis) {
  Caller agent;
  agent.node = "node-a";
  EXPECT_TRUE(Allow(agent, Action::kAgent).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(Allow(agent, Action::kSubmitJob)));
  EXPECT_TRUE(absl::IsPermissionDenied(Allow(User("root", Role::kAdmin), Action::kAgent)));
  Caller unchecked;
  unchecked.unchecked = true;
  EXPECT_TRUE(Allow(unchecked, Action::kAgent).ok());
  EXPECT_TRUE(Allow(unchecked, Action::kDrainNode).ok());
}

TEST(AccessPolicy, OnlyAdminsSubmitOnBehalfOfOthers) {
  EXPECT_EQ(*SubmissionOwner(User("alice", Role::kUser), ""), "alice");
  EXPECT_EQ(*SubmissionOwner(User("alice", Role::kUser), "alice"), "alice");
  auto other = SubmissionOwner(User("alice", Role::kOperator), "bob");
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(absl::StrContains(other.status().message(), "may not submit as bob")) << other.status();
  EXPECT_EQ(*SubmissionOwner(User("root", Role::kAdmin), "bob"), "bob");
  // Without authentication the spec says whose job it is, and a raw client that forgets is told.
  Caller unchecked;
  unchecked.unchecked = true;
  EXPECT_EQ(*SubmissionOwner(unchecked, "carol"), "carol");
  auto nobody = SubmissionOwner(unchecked, "");
  ASSERT_TRUE(absl::IsInvalidArgument(nobody.status())) << nobody.status();
  EXPECT_TRUE(
      absl::StrContains(nobody.status().message(), "user: required by a daemon without authentication (--insecure)"))
      << nobody.status();
  EXPECT_FALSE(SeesAllJobs(User("alice", Role::kUser)));
  EXPECT_TRUE(SeesAllJobs(User("vera", Role::kViewer)));
}

// --- token file
std::string TokenFileText(const std::vector<std::tuple<std::string, std::string, std::string>>& entries) {
  nlohmann::json doc = {{"tokens", nlohmann::json::array()}};
  for (const auto& [token, user, role] : entries) {
    doc["tokens"].push_back({{"user", user}, {"role", role}, {"group", "g1"}, {"sha256", Sha256Hex(token)}});
  }
  return doc.dump();
}

TEST(TokenFile, HashesAreSha256) {
  // FIPS 180-2 test vector.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokenFile, FindsByTokenAndRefusesBadEntries) {
  auto table = TokenTable::Parse(TokenFileText({{"tok-a", "alice", "user"}, {"tok-o", "olga", "operator"}}));
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_NE(table->Find("tok-a"), nullptr);
  EXPECT_EQ(table->Find("tok-a")->user, "alice");
  EXPECT_EQ(table->Find("tok-o")->role, Role::kOperator);
  EXPECT_EQ(table->Find("tok-x"), nullptr);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[]", "expected {\"tokens\""},
      {"{", "not valid JSON"},
      {R"({"tokens": [{"user": "a", "role": "user", "sha256": "12"}]})", "tokens[0].sha256"},
      {R"({"tokens": [{"user": "a", "role": "root", "sha256": ")" + Sha256Hex("x") + "\"}]}", "tokens[0].role 'root'"},
      {R"({"tokens": [{"user": "a b", "role": "user", "sha256": ")" + Sha256Hex("x") + "\"}]}", "tokens[0].user"},
      {R"({"tokens": [{"user": "a", "role": "user", "sha256": ")" + Sha256Hex("x") + R"(", "extra": "1"}]})",
       "unknown field 'extra'"},
      {R"({"tokens": [{"user": 5, "role": "user"}]})", "tokens[0].user: expected a string"},
      {TokenFileText({{"t", "a", "user"}, {"t", "b", "user"}}), "the same token appears twice"},
  };
  for (const auto& [text, expected] : bad) {
    auto parsed = TokenTable::Parse(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), expected)) << parsed.status() << " for " << text;
  }
}

// --- authenticator
// Rewrites `path` with `text` and sets its modification time `seconds` past the epoch's
// millionth second: a change the watcher sees however fast the test runs (the file system's
// clock may not have moved between two writes).
void RewriteWithNewTime(const std::string& path, const std::string& text, int seconds) {
  std::ofstream(path, std::ios::trunc) << text;
  const struct timespec times[2] = {{1'000'000 + seconds, 0}, {1'000'000 + seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(Authenticator, TokensCertificatesAndRevocation) {
  hetpool::testing::TempDir dir;
  const std::string path = dir.path() + "/tokens.json";
  std::ofstream(path) << TokenFileText({{"tok-a", "alice", "user"}});
  absl::Time now = absl::FromUnixSeconds(1'000'000);  // the clock that paces the looks at the file
  auto auth = Authenticator::Open(path, [&now] { return now; });
  ASSERT_TRUE(auth.ok()) << auth.status();

  auto alice = (*auth)->Authenticate("Bearer tok-a", {});
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->user, "alice");
  EXPECT_EQ(alice->group, "g1");
  EXPECT_EQ(alice->role, Role::kUser);
  EXPECT_TRUE(absl::IsUnauthenticated((*auth)->Authenticate("Bearer nope", {}).status()));
  EXPECT_TRUE(absl::IsUnauthenticated((*auth)->Authenticate("Basic dG9r", {}).status()));
  const absl::Status none = (*auth)->Authenticate(std::nullopt, {}).status();
  EXPECT_TRUE(absl::IsUnauthenticated(none));
  // Names the header as well as the CLI's flag, for clients that are not hetpoolctl.
  EXPECT_TRUE(absl::StrContains(none.message(), "'authorization: Bearer <token>'")) << none;
  EXPECT_TRUE(absl::StrContains(none.message(), "--token")) << none;
  EXPECT_TRUE(absl::IsUnauthenticated((*auth)->Authenticate(std::nullopt, {"hetpoold"}).status()));
  auto node = (*auth)->Authenticate(std::nullopt, {"node:node-a"});
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->node, "node-a");

  // Revoking alice and adding bob takes effect without a restart (the file is re-read at the
  // next look, a second after the last one).
  RewriteWithNewTime(path, TokenFileText({{"tok-b", "bob", "viewer"}}), 1);
  EXPECT_TRUE((*auth)->Authenticate("Bearer tok-a", {}).ok()) << "looked again within the second";
  now += absl::Milliseconds(1100);
  EXPECT_TRUE(absl::IsUnauthenticated((*auth)->Authenticate("Bearer tok-a", {}).status()));
  auto bob = (*auth)->Authenticate("Bearer tok-b", {});
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_EQ(bob->role, Role::kViewer);

  // A broken file keeps the last good table.
  RewriteWithNewTime(path, "{ broken", 2);
  now += absl::Milliseconds(1100);
  EXPECT_TRUE((*auth)->Authenticate("Bearer tok-b", {}).ok());

  EXPECT_FALSE(Authenticator::Open(dir.path() + "/missing.json").ok());
}

// Issue 60, item 8: tokens may expire; an expired one is refused, saying when it expired.
TEST(Authenticator, AnExpiredTokenIsRefusedSayingWhen) {
  hetpool::testing::TempDir dir;
  const std::string path = dir.path() + "/tokens.json";
  nlohmann::json doc = nlohmann::json::parse(TokenFileText({{"tok-old", "alice", "user"}, {"tok-new", "bob", "user"}}));
  doc["tokens"][0]["expires"] = "2020-01-01T00:00:00Z";
  doc["tokens"][1]["expires"] = "2999-01-01T00:00:00Z";
  std::ofstream(path) << doc.dump();
  auto auth = Authenticator::Open(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  const absl::Status old = (*auth)->Authenticate("Bearer tok-old", {}).status();
  EXPECT_TRUE(absl::IsUnauthenticated(old)) << old;
  EXPECT_TRUE(absl::StrContains(old.message(), "expired at 2020-01-01T00:00:00")) << old;
  EXPECT_TRUE((*auth)->Authenticate("Bearer tok-new", {}).ok());
  doc["tokens"][1]["expires"] = "next week";
  const auto bad = TokenTable::Parse(doc.dump());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "tokens[1].expires")) << bad.status();
}

// Issue 60, item 6: calls and streams in flight, capped per user and per connection.
TEST(CallLimiter, CapsCallsAndStreamsPerUserAndStreamsPerConnection) {
  CallLimiter limiter({.calls_per_user = 2, .streams_per_user = 3, .streams_per_connection = 4});
  auto a = limiter.Admit("alice", "ipv4:1", false);
  auto b = limiter.Admit("alice", "ipv4:1", false);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto third = limiter.Admit("alice", "ipv4:1", false);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_TRUE(absl::StrContains(third.status().message(), "--max-calls-per-user")) << third.status();
  EXPECT_TRUE(limiter.Admit("bob", "ipv4:1", false).ok());  // others are not held back
  { auto gone = std::move(*a); }                            // a call that ends gives its place back
  EXPECT_EQ(limiter.calls("alice"), 1);
  EXPECT_TRUE(limiter.Admit("alice", "ipv4:1", false).ok());

  std::vector<CallLimiter::Ticket> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(*limiter.Admit("alice", "ipv4:2", true));
  const auto fourth = limiter.Admit("alice", "ipv4:2", true);
  EXPECT_TRUE(absl::StrContains(fourth.status().message(), "--max-streams-per-user")) << fourth.status();
  streams.push_back(*limiter.Admit("bob", "ipv4:2", true));
  const auto crowded = limiter.Admit("carol", "ipv4:2", true);
  EXPECT_TRUE(absl::StrContains(crowded.status().message(), "--max-streams-per-connection")) << crowded.status();
  EXPECT_TRUE(limiter.Admit("carol", "ipv4:3", true).ok());
  streams.clear();
  EXPECT_EQ(limiter.streams("alice"), 0);
  // Under --insecure nobody is identified: only the connection's cap holds.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Admit(std::nullopt, "ipv4:4", false).ok());
  for (int i = 0; i < 4; ++i) streams.push_back(*limiter.Admit(std::nullopt, "ipv4:4", true));
  EXPECT_FALSE(limiter.Admit(std::nullopt, "ipv4:4", true).ok());
}

// --- audit line
TEST(AuditLog, OneJsonLinePerCallEvenForHostileBytes) {
  Caller alice = User("alice", Role::kUser);
  AuditRecord r;
  r.time = absl::FromUnixSeconds(0);
  r.caller = &alice;
  r.peer = "ipv4:127.0.0.1:1";
  r.method = "CancelJob";
  r.target = std::string("job-\"1\"\n\xff", 10);
  r.result = absl::PermissionDeniedError("no");
  const std::string line = AuditLine(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto j = nlohmann::json::parse(line, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << line;
  EXPECT_EQ(j["caller"], "alice");
  EXPECT_EQ(j["role"], "user");
  EXPECT_EQ(j["method"], "CancelJob");
  EXPECT_EQ(j["code"], "PERMISSION_DENIED");
  EXPECT_EQ(j["time"], "1970-01-01T00:00:00.000Z");

  hetpool::testing::TempDir dir;
  auto log = AuditLog::Open(dir.path() + "/audit.log");
  ASSERT_TRUE(log.ok());
  (*log)->Record(r);
  r.caller = nullptr;
  (*log)->Record(r);
  std::ifstream in(dir.path() + "/audit.log");
  std::string first, second;
  ASSERT_TRUE(std::getline(in, first));
  ASSERT_TRUE(std::getline(in, second));
  EXPECT_TRUE(nlohmann::json::parse(second)["caller"].is_null());
}

TEST(AuditLog, BoundsWhatTheCallerChoseAndRotates) {
  Caller alice = User("alice", Role::kUser);
  AuditRecord r;
  r.time = absl::FromUnixSeconds(0);
  r.caller = &alice;
  r.method = "SubmitJob";
  const std::string huge(8 << 20, 'n');
  r.target = huge;
  r.result = absl::InvalidArgumentError(absl::StrCat("name: '", huge, "' is too long"));
  const std::string line = AuditLine(r);
  EXPECT_LT(line.size(), 2048u);
  auto j = nlohmann::json::parse(line);
  EXPECT_TRUE(absl::StrContains(j["target"].get<std::string>(), absl::StrCat(huge.size(), " bytes, sha256 ")));
  // Two long values differing at the end stay distinguishable.
  r.target = huge.substr(1) + "m";
  EXPECT_NE(nlohmann::json::parse(AuditLine(r))["target"], j["target"]);

  hetpool::testing::TempDir dir;
  const std::string path = dir.path() + "/audit.log";
  auto log = AuditLog::Open(path, AuditLogOptions{.max_bytes = 4096, .keep = 2});
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 200; ++i) (*log)->Record(r);  // 12 refused 8 MB submits cost ~91 MiB before
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) total += entry.file_size();
  EXPECT_LE(total, 3u * 4096u);
  EXPECT_TRUE(std::filesystem::exists(path + ".1"));
  EXPECT_TRUE(std::filesystem::exists(path + ".2"));
  EXPECT_FALSE(std::filesystem::exists(path + ".3"));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(path);
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  EXPECT_FALSE(nlohmann::json::parse(first, nullptr, false).is_discarded());  // whole lines only
}

// --- rate limiter
TEST(RateLimiter, BurstThenRatePerUser) {
  absl::Time now = absl::FromUnixSeconds(1000);
  RateLimiter limiter(2.0, 3.0, [&now] { return now; });
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit("alice").ok()) << i;
  absl::Status over = limiter.Admit("alice");
  EXPECT_TRUE(absl::IsResourceExhausted(over));
  EXPECT_TRUE(absl::StrContains(over.message(), "alice may submit 2 jobs/s")) << over;
  EXPECT_TRUE(absl::StrContains(over.message(), "retry in 500 ms")) << over;
  EXPECT_TRUE(limiter.Admit("bob").ok());  // others are not slowed
  now += absl::Milliseconds(500);
  EXPECT_TRUE(limiter.Admit("alice").ok());
  EXPECT_FALSE(limiter.Admit("alice").ok());
  RateLimiter unlimited(0, 0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(unlimited.Admit("x").ok());
}

// Issue 60, item 2: the limiter runs on the monotonic clock by default, and a clock that goes
// back (the wall clock stepped back an hour, as hetpoold's was under libfaketime) adds no debt:
// before, every submission after the step was refused "retry in 7172040 ms".
TEST(RateLimiter, AClockThatGoesBackPutsNoUserInDebt) {
  absl::Time now = absl::FromUnixSeconds(10'000);
  RateLimiter limiter(2.0, 3.0, [&now] { return now; });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.Admit("alice").ok()) << i;
  now -= absl::Hours(1);
  absl::Status over = limiter.Admit("alice");
  EXPECT_TRUE(absl::StrContains(over.message(), "retry in 500 ms")) << over;
  now += absl::Milliseconds(500);
  EXPECT_TRUE(limiter.Admit("alice").ok());
  // The default clock is the monotonic one.
  RateLimiter by_default(2.0, 3.0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(by_default.Admit("bob").ok()) << i;
  EXPECT_FALSE(by_default.Admit("bob").ok());
}

// --- quotas
TEST(Quota, CardLimitsBySelectorUserAndGroup) {
  auto table = QuotaTable::Parse(R"({"users": {"alice": {"cards": {"*": 8, "nvidia": 4}, "queued_jobs": 2}},
                                     "groups": {"vision": {"cards": {"fp-h100": 6}}},
                                     "default_user": {"cards": {"*": 1.5}}})");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_FALSE(table->reject_over_quota());
  CardHoldings alice = {{{"nvidia", "fp-h100"}, 3000}, {{"metax", "fp-c500"}, 2000}};
  CardHoldings vision = {{{"nvidia", "fp-h100"}, 5000}};
  // One more NVIDIA card: 3 + 1 <= 4 for alice, but the group holds 5 of 6 H100s.
  EXPECT_FALSE(table->CardsBlocked("alice", alice, "", {}, "nvidia", "fp-h100", 1000));
  auto group = table->CardsBlocked("alice", alice, "vision", vision, "nvidia", "fp-h100", 2000);
  ASSERT_TRUE(group);
  // alice's own nvidia limit trips first: 3 + 2 > 4.
  EXPECT_EQ(*group, "quota: user alice holds 3 of 4 cards (nvidia); the job needs 2");
  auto grp = table->CardsBlocked("alice", {}, "vision", vision, "nvidia", "fp-h100", 2000);
  ASSERT_TRUE(grp);
  EXPECT_EQ(*grp, "quota: group vision holds 5 of 6 cards (fp-h100); the job needs 2");
  // MetaX: only "*" applies: 5 held + 3 = 8 fits, + 4 does not.
  EXPECT_FALSE(table->CardsBlocked("alice", alice, "", {}, "metax", "fp-c500", 3000));
  EXPECT_TRUE(table->CardsBlocked("alice", alice, "", {}, "metax", "fp-c500", 4000));
  // Users without an entry get default_user; fractions count by their share.
  EXPECT_FALSE(table->CardsBlocked("carol", {{{"intel", "fp-max"}, 1000}}, "", {}, "intel", "fp-max", 500));
  auto carol = table->CardsBlocked("carol", {{{"intel", "fp-max"}, 1000}}, "", {}, "intel", "fp-max", 600);
  ASSERT_TRUE(carol);
  EXPECT_EQ(*carol, "quota: user carol holds 1 of 1.5 cards (*); the job needs 0.6");
  // Queue limit.
  EXPECT_FALSE(table->QueueBlocked("alice", 1, "", 0));
  EXPECT_EQ(*table->QueueBlocked("alice", 2, "", 0), "quota: user alice has 2 queued jobs (limit 2)");
}

TEST(Quota, ParseErrorsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"on_exceed": "later"})", "on_exceed"},
      {R"({"users": {"a": {"cards": {"*": -1}}}})", "users[a].cards[*]"},
      {R"({"users": {"a": {"gpus": 1}}})", "unknown key 'gpus'"},
      {R"({"groups": {"g": {"queued_jobs": 1.5}}})", "groups[g].queued_jobs"},
      {R"({"limits": {}})", "limits: unknown key"},
      {"[1]", "expected a JSON object"},
  };
  for (const auto& [text, expected] : bad) {
    auto parsed = QuotaTable::Parse(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), expected)) << parsed.status();
  }
  auto reject = QuotaTable::Parse(R"({"on_exceed": "reject"})");
  ASSERT_TRUE(reject.ok());
  EXPECT_TRUE(reject->reject_over_quota());
}

}  // namespace
}  // namespace hetpool::daemon
