// Modules of src/common that carry user input across programs: orders split into parts that fit
// a message (issue 14, item 4), duplicate keys in job files and requests that are not UTF-8
// (item 9), and the elastic job file's nnodes range (issue 16, item 3).
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/common/escaped_log.h"
#include "src/common/flags.h"
#include "src/common/job_file.h"
#include "src/common/json_keys.h"
#include "src/common/orders_parts.h"
#include "src/common/torchrun_lines.h"
#include "src/common/utf8.h"
#include "request_parsing.h"
#include "tests/testing/temp_dir.h"

namespace hetpool {
namespace {

namespace pb = ::hetpool::v1;

pb::Orders BigOrders(int launches, size_t env_bytes) {
  pb::Orders orders;
  orders.set_version(77);
  for (int i = 0; i < launches; ++i) {
    auto* launch = orders.add_launches();
    launch->set_job_id("job-" + std::to_string(i));
    launch->set_generation(1);
    (*launch->mutable_plan()->mutable_env())["BLOB"] = std::string(env_bytes, 'x');
  }
  orders.add_kills()->set_job_id("job-old");
  return orders;
}

// Issue 60, item 9: a cancel reason with escape sequences reached hetpoold's log raw. What a
// message holds is escaped, and a newline in it cannot start a forged line.
TEST(EscapedLogs, ControlsInAMessageAreWrittenOutAndItStaysOneLine) {
  std::ostringstream out;
  auto logger =
      std::make_shared<spdlog::logger>("escaped-log-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::register_logger(logger);
  UseEscapedLogs("%v");
  logger->warn("cancelled: {}",
               "\x1b]52;c;cm0gLXJmIH4=\x07"
               "done\n2026-01-01 info forged");
  spdlog::drop("escaped-log-test");
  EXPECT_EQ(out.str(), "cancelled: \\x1b]52;c;cm0gLXJmIH4=\\x07done\\n2026-01-01 info forged\n");
}

// Issue 60, item 8: a file holding a bearer token that others may read is refused, saying the
// mode and the chmod; a file that cannot be read says why.
TEST(ReadSecretFile, RefusesAFileOthersMayReadAndSaysWhyAFileCannotBeRead) {
  testing::TempDir dir;
  const std::string token = dir.path() + "/token";
  std::ofstream(token) << "hp_secret\n";
  ::chmod(token.c_str(), 0644);
  const auto open = ReadSecretFile(token);
  EXPECT_TRUE(absl::IsPermissionDenied(open.status())) << open.status();
  EXPECT_TRUE(absl::StrContains(open.status().message(), "mode 0644")) << open.status();
  EXPECT_TRUE(absl::StrContains(open.status().message(), "chmod 600 " + token)) << open.status();
  ::chmod(token.c_str(), 0600);
  EXPECT_EQ(*ReadSecretFile(token), "hp_secret\n");
  const auto missing = ReadTextFile(dir.path() + "/missing");
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "No such file or directory")) << missing.status();
}

TEST(OrdersParts, EveryPartFitsAndTheAssemblerRebuildsTheWholeSet) {
  // 40 jobs of 250 KiB each: 10 MB, more than twice gRPC's default 4 MiB limit in one message.
  const pb::Orders orders = BigOrders(40, 250 * 1024);
  const auto parts = SplitOrders(orders);
  ASSERT_GT(parts.size(), 1u);
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_LE(parts[i].ByteSizeLong(), kOrdersPartBytes + 64) << i;
    EXPECT_EQ(parts[i].version(), 77u);
    EXPECT_EQ(parts[i].more(), i + 1 < parts.size()) << i;
  }
  OrdersAssembler assembler;
  std::optional<pb::Orders> whole;
  for (size_t i = 0; i < parts.size(); ++i) {
    whole = assembler.Add(parts[i]);
    EXPECT_EQ(whole.has_value(), i + 1 == parts.size()) << "a set is acted on only once complete";
  }
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->launches_size(), 40);
  EXPECT_EQ(whole->kills_size(), 1);
  EXPECT_FALSE(whole->more());
}

TEST(OrdersParts, SmallOrEmptySetsAreOneMessageAndANewVersionDropsAnUnfinishedOne) {
  pb::Orders empty;
  empty.set_version(3);
  ASSERT_EQ(SplitOrders(empty).size(), 1u);
  OrdersAssembler assembler;
  auto parts = SplitOrders(BigOrders(10, 300 * 1024));
  ASSERT_GT(parts.size(), 1u);
  EXPECT_FALSE(assembler.Add(parts[0]).has_value());
  pb::Orders newer = BigOrders(1, 10);
  newer.set_version(78);
  auto whole = assembler.Add(SplitOrders(newer)[0]);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->version(), 78u);
  EXPECT_EQ(whole->launches_size(), 1);  // nothing of version 77's first part leaked in
}

// `--state` takes the short names and the enum's own, as `-o json` prints it.
TEST(ParseJobState, ShortAndEnumNamesAnyCase) {
  EXPECT_EQ(*ParseJobState("failed"), hetpool::v1::JOB_STATE_FAILED);
  EXPECT_EQ(*ParseJobState("JOB_STATE_FAILED"), hetpool::v1::JOB_STATE_FAILED);
  EXPECT_EQ(*ParseJobState("job_state_running"), hetpool::v1::JOB_STATE_RUNNING);
  const auto bad = ParseJobState("JOB_STATE_DONE");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, CANCELLED"), std::string::npos)
      << bad.status();
}

// torchrun's line grammar, shared by the agent's failure report and the daemon's log labels.
TEST(TorchrunLines, RankTagsAndTorchrunsOwnLines) {
  ASSERT_TRUE(RankTagOf("[default3]:loss 0.5").has_value());
  EXPECT_EQ(RankTagOf("[default3]:loss 0.5")->local_rank, 3);
  EXPECT_EQ(RankTagOf("[default3]:loss 0.5")->length, 11u);
  EXPECT_EQ(RankTagOf("[trainer_12]:x")->local_rank, 12);  // any role name
  EXPECT_FALSE(RankTagOf("[default]:x").has_value());
  EXPECT_FALSE(RankTagOf("[default3] x").has_value());
  EXPECT_FALSE(RankTagOf("[default1234567]:x").has_value());
  EXPECT_FALSE(RankTagOf("default3]:x").has_value());
  EXPECT_TRUE(IsTorchrunChatter("WARNING:torch.distributed.run:"));
  EXPECT_TRUE(IsTorchrunChatter("*****************************************"));
  EXPECT_FALSE(IsTorchrunChatter("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)"));
  EXPECT_TRUE(IsTorchrunOwn("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)"));
  EXPECT_FALSE(IsTorchrunOwn("ValueError: bad batch size 0"));
}

TEST(ValidUtf8, BadBytesAreReplacedAndACutNeverSplitsACharacter) {
  EXPECT_EQ(ValidUtf8("loss 0.5"), "loss 0.5");
  const std::string han = "\xE6\x8D\x9F\xE5\xA4\xB1";  // two 3-byte characters
  EXPECT_EQ(ValidUtf8(han, 5), "\xE6\x8D\x9F");
  EXPECT_EQ(ValidUtf8(han, 6), han);
  EXPECT_EQ(ValidUtf8("a\xFF"
                      "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ValidUtf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");        // overlong NUL
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80").substr(0, 3), "\xEF\xBF\xBD");   // a surrogate
  EXPECT_EQ(ValidUtf8("ok \xE6\x8D"), "ok \xEF\xBF\xBD\xEF\xBF\xBD");  // a character cut short
  EXPECT_EQ(ValidUtf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_TRUE(IsValidUtf8(han));
  EXPECT_TRUE(IsValidUtf8(ValidUtf8("a\xFF\xE6\x8D")));
  EXPECT_FALSE(IsValidUtf8(han.substr(0, 4)));
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  // Why: a string field that is not UTF-8 makes the whole message unparseable for its reader.
  pb::RankFailure raw, cleaned;
  raw.add_last_lines(han.substr(0, 4));
  cleaned.add_last_lines(ValidUtf8(han.substr(0, 4)));
  pb::RankFailure parsed;
  EXPECT_FALSE(parsed.ParseFromString(raw.SerializeAsString()));
  ASSERT_TRUE(parsed.ParseFromString(cleaned.SerializeAsString()));
  EXPECT_EQ(parsed.last_lines(0), "\xE6\x8D\x9F\xEF\xBF\xBD");
}

TEST(JsonKeys, DuplicateKeysAreNamedWithTheirPath) {
  EXPECT_TRUE(CheckNoDuplicateKeys(R"({"nnodes": 2, "env": {"A": "1", "B": "2"}, "labels": {"A": "x"}})").ok());
  absl::Status top = CheckNoDuplicateKeys(R"({"nnodes": 2, "devices_per_node": 1, "nnodes": 8})");
  EXPECT_TRUE(absl::IsInvalidArgument(top));
  EXPECT_EQ(top.message(), "nnodes: the key appears twice in one object");
  absl::Status nested = CheckNoDuplicateKeys(R"({"python": {"script": "a.py"}, "env": {"TOKEN": "1", "TOKEN": "2"}})");
  EXPECT_EQ(nested.message(), "env.TOKEN: the key appears twice in one object");
  absl::Status in_array = CheckNoDuplicateKeys(R"({"groups": [{"n": 1}, {"n": 2, "n": 3}]})");
  EXPECT_EQ(in_array.message(), "groups.n: the key appears twice in one object");
  EXPECT_TRUE(CheckNoDuplicateKeys("{not json").ok());  // syntax is the parser's to report
}

TEST(JobFile, AnElasticNnodesRangeIsWrittenOut) {
  auto expanded = ExpandJobFileShorthands(R"({"nnodes": {"min": 2, "max": 8}, "devices_per_node": 4})");
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  pb::JobSpec spec;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*expanded, &spec).ok()) << *expanded;
  EXPECT_EQ(spec.nnodes(), 2);
  EXPECT_EQ(spec.elastic_nnodes().min(), 2);
  EXPECT_EQ(spec.elastic_nnodes().max(), 8);
  EXPECT_EQ(spec.devices_per_node(), 4);
  // Anything else passes as it was (the protobuf parser judges it).
  EXPECT_EQ(*ExpandJobFileShorthands(R"({"nnodes": 2})"), R"({"nnodes": 2})");
  EXPECT_EQ(*ExpandJobFileShorthands("{not json"), "{not json");
  // A range it cannot read says why.
  EXPECT_EQ(ExpandJobFileShorthands(R"({"nnodes": {"min": 2}})").status().message(),
            "nnodes: an elastic job names both min and max ({\"min\": N, \"max\": M})");
  EXPECT_EQ(ExpandJobFileShorthands(R"({"nnodes": {"min": 2, "max": "8"}})").status().message(),
            "nnodes.max: not an integer");
  EXPECT_EQ(ExpandJobFileShorthands(R"({"nnodes": {"min": 1, "max": 2, "step": 1}})").status().message(),
            "nnodes: unknown key 'step' (an elastic job writes {\"min\": N, \"max\": M})");
  EXPECT_TRUE(absl::IsInvalidArgument(
      ExpandJobFileShorthands(R"({"nnodes": {"min": 1, "max": 2}, "elastic_nnodes": {"min": 1, "max": 3}})").status()));
}

TEST(RequestParsing, TheFirstStringThatIsNotUtf8IsNamedByItsPath) {
  const pb::JobSpec good = [] {
    pb::JobSpec spec;
    spec.set_name("caf\xc3\xa9 \xe4\xb8\xad\xf0\x9f\x98\x80");  // 2-, 3- and 4-byte characters
    spec.add_command("python");
    (*spec.mutable_env())["HOME"] = "/tmp";
    return spec;
  }();
  pb::SubmitJobRequest request;
  *request.mutable_spec() = good;
  const auto& descriptor = *pb::SubmitJobRequest::descriptor();
  EXPECT_EQ(rpc::FirstInvalidUtf8Field(descriptor, request.SerializeAsString()), "");
  for (const auto& [bad, what] :
       std::vector<std::pair<std::string, std::string>>{{"\xc3\x28", "cut sequence"},
                                                        {"\xc0\xaf", "overlong"},
                                                        {"\xed\xa0\x80", "surrogate"},
                                                        {"\xf4\x90\x80\x80", "above U+10FFFF"},
                                                        {"ab\xe4\xb8", "truncated at the end"}}) {
    request.mutable_spec()->add_command(bad);
    EXPECT_EQ(rpc::FirstInvalidUtf8Field(descriptor, request.SerializeAsString()), "spec.command[1]") << what;
    *request.mutable_spec() = good;
    (*request.mutable_spec()->mutable_env())["HOME"] = bad;
    EXPECT_EQ(rpc::FirstInvalidUtf8Field(descriptor, request.SerializeAsString()), "spec.env[HOME]") << what;
    *request.mutable_spec() = good;
    (*request.mutable_spec()->mutable_env())[bad] = "x";
    EXPECT_EQ(rpc::FirstInvalidUtf8Field(descriptor, request.SerializeAsString()), "spec.env (a key)") << what;
    *request.mutable_spec() = good;
  }
}

TEST(RequestParsing, WhatGrpcCannotParseIsRefusedWithTheReason) {
  pb::GetJobRequest request;
  request.set_job_id("job-\xff");
  const std::string bytes = request.SerializeAsString();
  auto parse = [](const std::string& wire, pb::GetJobRequest* out) {
    grpc::Slice slice(wire);
    grpc::ByteBuffer buffer(&slice, 1);
    return rpc::ParseRequest(&buffer, out);
  };
  pb::GetJobRequest parsed;
  grpc::Status s = parse(bytes, &parsed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "field job_id of GetJobRequest is not valid UTF-8 (string fields must be UTF-8)");
  s = parse("\x0a\x7f", &parsed);  // field 1, 127 bytes announced, none there
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "request is not a valid hetpool.v1.GetJobRequest protobuf message (2 bytes)");
  request.set_job_id("job-7");
  ASSERT_TRUE(parse(request.SerializeAsString(), &parsed).ok());
  EXPECT_EQ(parsed.job_id(), "job-7");
}

}  // namespace
}  // namespace hetpool

namespace hetpool {
namespace {

// An agent's collectives: names this daemon does not know are kept (a newer agent may report
// more; a registration refused for one would take the node out of the pool), malformed ones not.
TEST(InventoryFromProto, CollectivesKeepUnknownNamesAndRefuseMalformedOnes) {
  pb::NodeInventory in;
  in.set_hostname("n");
  in.add_collectives("flagcx");
  in.add_collectives("future-ccl_2");
  auto inv = FromProto(in);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->collectives, (std::set<std::string>{"flagcx", "future-ccl_2"}));
  for (const std::string& bad : {std::string(""), std::string("Flag CX"), std::string(33, 'a')}) {
    pb::NodeInventory b = in;
    b.add_collectives(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(FromProto(b).status())) << bad;
  }
}

}  // namespace
}  // namespace hetpool
