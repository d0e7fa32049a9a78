// hetpoolctl as researchers and CI use it: job files, tables and JSON, exit codes, one-line errors.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {
namespace {

class CliTest : public ExamplePoolSuite {
 protected:
  static std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = cluster_->dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(CliTest, UnknownFieldInJobFileIsAnErrorNamingIt) {
  const std::string file = WriteFile("typo.json", R"({"name": "x", "nnodes": 1, "devices_per_nodes": 2,
      "command": ["/bin/true"]})");
  std::string out;
  EXPECT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 1);
  EXPECT_NE(out.find("devices_per_nodes"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST_F(CliTest, InvalidSpecIsOneLineWithTheField) {
  const std::string file = WriteFile("bad.json", R"({"nnodes": 0, "command": ["/bin/true"]})");
  std::string out;
  EXPECT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 1);
  EXPECT_EQ(out, "hetpoolctl: INVALID_ARGUMENT: nnodes: must be between 1 and 1024, got 0\n");
}

TEST_F(CliTest, SubmitWaitGetListLogs) {
  const std::string file = WriteFile("cpu.json", R"({
      "name": "cli-cpu", "labels": {"suite": "cli"},
      "python": {"script": "deploy/examples/train_ddp.py", "args": ["--steps", "3"]},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(",
      "nnodes": 2, "devices_per_node": 0, "procs_per_node": 1,
      "requirements": {"vendors": ["cpu"]}})");
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  ASSERT_EQ(id.rfind("job-", 0), 0u) << out;

  ASSERT_EQ(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 0) << out;
  EXPECT_NE(out.find(id + " SUCCEEDED"), std::string::npos) << out;

  ASSERT_EQ(cluster_->RunCli({"get", id, "-o", "json"}, &out), 0) << out;
  auto job = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(job.is_discarded()) << out;
  EXPECT_EQ(job["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(job["spec"]["labels"]["suite"], "cli");
  EXPECT_EQ(job["launch_plan"][0]["env"]["HETPOOL_DIST_BACKEND"], "gloo");

  ASSERT_EQ(cluster_->RunCli({"list", "--label", "suite=cli", "--state", "succeeded"}, &out), 0) << out;
  EXPECT_NE(out.find(id), std::string::npos) << out;
  EXPECT_NE(out.find("cli-cpu"), std::string::npos) << out;
  // The state as -o json prints it is accepted too; global flags may follow the command.
  ASSERT_EQ(cluster_->RunCli({"list", "--label", "suite=cli", "--state", "JOB_STATE_SUCCEEDED", "--insecure"}, &out), 0)
      << out;
  EXPECT_NE(out.find(id), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"get", id, "--server", cluster_->address()}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"get", "--help"}, &out), 0) << out;
  EXPECT_EQ(out.rfind("hetpoolctl get ID", 0), 0u) << out;
  ASSERT_EQ(cluster_->RunCli({"list", "--help"}, &out), 0) << out;
  EXPECT_NE(out.find("pending, scheduled, running, succeeded, failed, cancelled"), std::string::npos) << out;

  ASSERT_EQ(cluster_->RunCli({"logs", id}, &out), 0) << out;
  EXPECT_NE(out.find("final loss"), std::string::npos) << out;
  // Two nodes' output: each line says its node and global rank; torchrun's chatter is left out.
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "[node-a") || absl::StartsWith(line, "[node-b")) << line;
  }
  EXPECT_EQ(out.find("WARNING:torch.distributed"), std::string::npos) << out;
  EXPECT_EQ(out.find("[default"), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"logs", id, "--rank", "1"}, &out), 0) << out;
  EXPECT_NE(out.find(" r1] rank 1: WORLD_SIZE=2"), std::string::npos) << out;
  EXPECT_EQ(out.find("rank 0:"), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"logs", id, "--raw"}, &out), 0) << out;
  EXPECT_NE(out.find("[default0]:"), std::string::npos) << out;  // as torchrun wrote it

  EXPECT_EQ(cluster_->RunCli({"cancel", id}, &out), 1);
  EXPECT_NE(out.find("FAILED_PRECONDITION"), std::string::npos) << out;
}

TEST_F(CliTest, ListShowsTheNewestFirstAPageAtATimeAndSaysHowToSeeMore) {
  const std::string file = WriteFile("paging.json", R"({"command": ["/bin/true"], "labels": {"suite": "paging"},
      "nnodes": 1, "devices_per_node": 0, "procs_per_node": 1, "working_dir": "/tmp", "requirements": {"vendors": ["cpu"]}})");
  std::vector<std::string> ids;
  std::string out;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
    ids.push_back(out.substr(0, out.find('\n')));
  }
  auto listed = [&](std::vector<std::string> args, std::string* token = nullptr) {
    args.insert(args.begin(), {"list", "--label", "suite=paging", "-o", "json"});
    std::vector<std::string> got;
    EXPECT_EQ(cluster_->RunCli(args, &out), 0) << out;
    auto page = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(page.is_discarded()) << out;
    if (page.is_discarded()) return got;
    for (const auto& job : page.value("jobs", nlohmann::json::array())) got.push_back(job["id"]);
    if (token != nullptr) *token = page.value("next_page_token", "");
    return got;
  };
  std::string token;
  EXPECT_EQ(listed({"--limit", "2"}, &token), (std::vector<std::string>{ids[2], ids[1]}));
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(listed({"--limit", "2", "--page-token", token}, &token), (std::vector<std::string>{ids[0]}));
  EXPECT_TRUE(token.empty());
  EXPECT_EQ(listed({"--all", "--oldest-first"}), ids);
  EXPECT_EQ(listed({"--since", "1h"}).size(), 3u);
  EXPECT_TRUE(listed({"--until", "1h"}).empty());  // all submitted within the hour
  // The table says, on its last line, how to go on.
  ASSERT_EQ(cluster_->RunCli({"list", "--label", "suite=paging", "--limit", "1"}, &out), 0) << out;
  EXPECT_NE(out.find(ids[2]), std::string::npos) << out;
  EXPECT_EQ(out.find(ids[1]), std::string::npos) << out;
  EXPECT_NE(out.find("more: hetpoolctl list --page-token "), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"list", "--limit", "0"}, &out), 2) << out;
  EXPECT_NE(out.find("--limit: must be at least 1"), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"list", "--since", "yesterday"}, &out), 2) << out;
  EXPECT_NE(out.find("--since: 'yesterday' is neither"), std::string::npos) << out;
}

TEST_F(CliTest, WaitTimesOutWithItsOwnExitCode) {
  // Needs more NVIDIA cards than are free while we drain both nodes.
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"drain", "node-a"}, &out), 0) << out;
  const std::string file = WriteFile("wait.json", R"({"command": ["/bin/true"], "nnodes": 1,
      "devices_per_node": 1, "working_dir": "/tmp"})");
  ASSERT_EQ(cluster_->RunCli({"drain", "node-b"}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  EXPECT_EQ(cluster_->RunCli({"wait", id, "--timeout", "1s"}, &out), 124) << out;
  ASSERT_EQ(cluster_->RunCli({"undrain", "node-a"}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"undrain", "node-b"}, &out), 0) << out;
  EXPECT_EQ(cluster_->RunCli({"wait", id, "--timeout", "60s"}, &out), 0) << out;
}

TEST_F(CliTest, AJobFileMayGiveAnElasticRangeOfNodes) {
  const std::string file = WriteFile("elastic.json", R"({"command": ["/bin/true"], "nnodes": {"min": 1, "max": 2},
      "devices_per_node": 1, "working_dir": "/tmp", "requirements": {"vendors": ["nvidia"]}})");
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  EXPECT_EQ(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"get", id, "-o", "json"}, &out), 0) << out;
  auto job = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(job.is_discarded()) << out;
  EXPECT_EQ(job["spec"]["nnodes"], 1);
  EXPECT_EQ(job["spec"]["elastic_nnodes"]["min"], 1);
  EXPECT_EQ(job["spec"]["elastic_nnodes"]["max"], 2);
  const auto& argv = job["launch_plan"][0]["argv"];
  auto nnodes = std::find(argv.begin(), argv.end(), "--nnodes");
  ASSERT_NE(nnodes, argv.end()) << argv;
  EXPECT_EQ(*std::next(nnodes), "1:2");

  const std::string bad = WriteFile("elastic-bad.json", R"({"command": ["/bin/true"], "nnodes": {"min": 1},
      "devices_per_node": 1, "working_dir": "/tmp"})");
  EXPECT_NE(cluster_->RunCli({"submit", "-f", bad}, &out), 0) << out;
  EXPECT_NE(out.find("nnodes: an elastic job names both min and max"), std::string::npos) << out;
}

TEST_F(CliTest, FollowedLogsAndWatchStreamUntilTheJobEnds) {
  const std::string file = WriteFile("follow.json", R"({
      "python": {"script": "deploy/examples/train_ddp.py", "args": ["--steps", "20", "--step-sleep", "0.1"]},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(",
      "nnodes": 1, "devices_per_node": 0, "procs_per_node": 2, "requirements": {"vendors": ["cpu"]}})");
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  // Started right away, `logs -f` returns only once the job has ended, with the whole output.
  ASSERT_EQ(cluster_->RunCli({"logs", id, "-f"}, &out), 0) << out;
  EXPECT_NE(out.find("step 19 loss"), std::string::npos) << out;
  EXPECT_NE(out.find("final loss"), std::string::npos) << out;
  auto job = cluster_->Get(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(cluster_->RunCli({"watch", id}, &out), 0) << out;
  for (const char* event : {"Submitted", "Scheduled", "Running", "Succeeded"}) {
    EXPECT_NE(out.find(event), std::string::npos) << event << "\n" << out;
  }
}

// `wait` and `watch` exit with whose failure it was (3 the job's, 4 the pool's, 5 cancelled), or
// with the failing rank's own code; `-o json watch` is JSON Lines, one event per line from the first.
TEST_F(CliTest, WaitAndWatchSayWhoseFailureItWas) {
  const std::string file = WriteFile("fails.json", R"({
      "python": {"script": "tests/integration/scripts/exit_on_rank.py", "args": ["1", "7"]},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(",
      "nnodes": 1, "devices_per_node": 0, "procs_per_node": 2, "requirements": {"vendors": ["cpu"]}})");
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  EXPECT_EQ(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 3) << out;
  EXPECT_NE(out.find("rank 1 on "), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"wait", id, "--job-exit-code"}, &out), 7) << out;
  const std::string report = cluster_->dir() + "/junit.xml";
  EXPECT_EQ(cluster_->RunCli({"wait", id, "--junit", report}, &out), 3) << out;
  std::ifstream xml_file(report);
  const std::string xml((std::istreambuf_iterator<char>(xml_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("<failure type=\"NonZeroExit\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("giving up: out of data on this shard</failure>"), std::string::npos) << xml;
  ASSERT_EQ(cluster_->RunCli({"get", id}, &out), 0) << out;
  EXPECT_NE(out.find("failure:     rank 1 (local rank 1 on "), std::string::npos) << out;
  EXPECT_NE(out.find("exited with code 7 (the job's own)"), std::string::npos) << out;
  EXPECT_NE(out.find("  | giving up: out of data on this shard"), std::string::npos) << out;

  EXPECT_EQ(cluster_->RunCli({"-o", "json", "watch", id}, &out), 3) << out;
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 4u) << out;
  for (const auto& line : lines) {
    pb::WatchEvent event;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &event).ok()) << line;
    EXPECT_EQ(event.job_id(), id);
  }
  EXPECT_NE(lines.front().find("\"reason\":\"Submitted\""), std::string::npos) << lines.front();
  EXPECT_NE(lines.back().find("\"reason\":\"NonZeroExit\""), std::string::npos) << lines.back();

  const std::string sleeper = WriteFile("sleeps.json", R"({"command": ["/bin/sleep", "60"], "working_dir": "/tmp",
      "nnodes": 1, "devices_per_node": 0, "procs_per_node": 1, "requirements": {"vendors": ["cpu"]}})");
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", sleeper}, &out), 0) << out;
  const std::string cancelled = out.substr(0, out.find('\n'));
  ASSERT_EQ(cluster_->RunCli({"cancel", cancelled}, &out), 0) << out;
  EXPECT_EQ(cluster_->RunCli({"wait", cancelled, "--timeout", "60s"}, &out), 5) << out;
  EXPECT_EQ(cluster_->RunCli({"watch", cancelled}, &out), 5) << out;
}

// Issue 45, item 5: a job printing OSC 52 (writes the reader's clipboard), a screen clear and a
// title change on stdout and stderr reaches no terminal through hetpoolctl: `get` (its failure
// lines and reason), `logs`, `wait` and `watch` show the control characters escaped; `logs --raw`
// keeps the bytes; JSON stays exact. Before, every one of them replayed the bytes raw.
TEST_F(CliTest, WhatAJobPrintsCannotDriveTheReadersTerminal) {
  const std::string file = WriteFile("hostile.json", R"({
      "name": "hostile",
      "command": ["/bin/sh", "-c",
                  "printf 'out \\033]52;c;aGk=\\007\\033[2J\\033]0;TITLE\\007\\n'; printf 'err \\033]52;c;aGk=\\007\\n' >&2; printf 'no newline'; exit 3"],
      "working_dir": "/tmp", "launcher": "torchrun",
      "nnodes": 1, "devices_per_node": 0, "procs_per_node": 1, "requirements": {"vendors": ["cpu"]}})");
  // Under torchrun, whose own lines interleave with the rank's (started directly, a job's output
  // is only its own, escaped by the same code).
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  const auto raw_controls = [](const std::string& text) {
    return std::count_if(text.begin(), text.end(), [](char c) {
      const unsigned char b = static_cast<unsigned char>(c);
      return (b < 0x20 && b != '\n' && b != '\t') || b == 0x7f;
    });
  };
  EXPECT_NE(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 0) << out;
  EXPECT_EQ(raw_controls(out), 0) << out;
  for (const std::vector<std::string>& command : {std::vector<std::string>{"get", id}, {"logs", id}, {"watch", id}}) {
    cluster_->RunCli(command, &out);
    EXPECT_EQ(raw_controls(out), 0) << command[0] << ":\n" << out;
    EXPECT_NE(out.find("\\x1b]52;c;aGk=\\x07"), std::string::npos) << command[0] << ":\n" << out;
  }
  ASSERT_EQ(cluster_->RunCli({"logs", id}, &out), 0) << out;
  EXPECT_NE(out.find("out \\x1b]52;c;aGk=\\x07\\x1b[2J\\x1b]0;TITLE\\x07\n"), std::string::npos) << out;
  EXPECT_NE(out.find("err \\x1b]52;c;aGk=\\x07\n"), std::string::npos) << out;
  // The rank's last line had no newline: it is ended before torchrun's next line, not joined to it.
  EXPECT_NE(out.find("] no newline\n"), std::string::npos) << out;

  ASSERT_EQ(cluster_->RunCli({"logs", id, "--raw"}, &out), 0) << out;
  EXPECT_NE(out.find("out \033]52;c;aGk=\007\033[2J\033]0;TITLE\007\n"), std::string::npos) << out;

  ASSERT_EQ(cluster_->RunCli({"get", id, "-o", "json"}, &out), 0) << out;
  auto job = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(job.is_discarded()) << out;
  const std::string last_lines = job["failure"]["last_lines"].dump();
  EXPECT_NE(last_lines.find("\\u001b]52;c;aGk=\\u0007"), std::string::npos) << last_lines;
}

// A script missing where the CLI can see the working dir is refused before it takes cards; one
// the CLI cannot check fails at once on the node as ScriptNotFound, the job's own failure.
TEST_F(CliTest, AMissingScriptIsCaughtBeforeItTakesCards) {
  const std::string file = WriteFile("typo.json", R"({
      "python": {"script": "deploy/examples/trian_ddp.py"},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(",
      "nnodes": 1, "devices_per_node": 0, "procs_per_node": 1, "requirements": {"vendors": ["cpu"]}})");
  std::string out;
  EXPECT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 1) << out;
  EXPECT_NE(out.find("python.script: deploy/examples/trian_ddp.py not found in " HETPOOL_SOURCE_DIR), std::string::npos)
      << out;
  EXPECT_NE(out.find("--skip-script-check"), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file, "--skip-script-check"}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  EXPECT_EQ(cluster_->RunCli({"wait", id, "--timeout", "60s"}, &out), 3) << out;
  EXPECT_NE(out.find("FAILED (ScriptNotFound: node "), std::string::npos) << out;
}

// Every `hetpoolctl plan` line of the README's "Planning by model" block runs as written on the
// quickstart pool (deploy/examples' nodes) and fits 100 columns.
TEST_F(CliTest, ReadmePlanExamplesRunOnTheQuickstartPool) {
  std::ifstream readme(HETPOOL_SOURCE_DIR "/README.md");
  std::string line;
  bool in_section = false;
  int ran = 0;
  while (std::getline(readme, line)) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## Planning by model";
    if (!in_section || !absl::StartsWith(line, "hetpoolctl plan ")) continue;
    std::string command = line.substr(0, line.find('#'));
    std::vector<std::string> args;
    for (absl::string_view word : absl::StrSplit(command, ' ', absl::SkipEmpty())) {
      std::string arg(word);
      if (absl::StartsWith(arg, "deploy/")) arg = std::string(HETPOOL_SOURCE_DIR "/") + arg;
      args.push_back(arg);
    }
    args.erase(args.begin());  // "hetpoolctl"
    std::string out;
    EXPECT_EQ(cluster_->RunCli(args, &out), 0) << line << "\n" << out;
    EXPECT_NE(out.find("\n1  "), std::string::npos) << "no ranked plan: " << line << "\n" << out;
    for (absl::string_view printed : absl::StrSplit(out, '\n')) {
      EXPECT_LE(printed.size(), 100u) << line << "\n" << printed;
    }
    ++ran;
  }
  EXPECT_EQ(ran, 3);
}

// The README's CI lines, run by bash as a pipeline step would: the step fails with the job's own
// exit code and leaves a JUnit report.
TEST_F(CliTest, ReadmeCiExampleFailsWithTheJobsOwnExitCode) {
  std::ifstream readme(HETPOOL_SOURCE_DIR "/README.md");
  const std::string text((std::istreambuf_iterator<char>(readme)), std::istreambuf_iterator<char>());
  const size_t section = text.find("CI pipelines submit, stream the logs");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = text.find("```sh\n", section) + 6, end = text.find("```", begin);
  const std::string step = text.substr(begin, end - begin);
  const std::string dir = cluster_->dir() + "/ci";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/job.json")
      << R"({"python": {"script": "tests/integration/scripts/exit_on_rank.py", "args": ["1", "7"]},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(", "nnodes": 1, "devices_per_node": 0, "procs_per_node": 2,
      "requirements": {"vendors": ["cpu"]}})";
  std::ofstream(dir + "/step.sh") << "set -e\ncd " << dir << "\n" << step;
  const std::string bin = std::filesystem::path(HETPOOLCTL_BIN).parent_path().string();
  auto child = ChildProcess::Spawn({"/bin/bash", dir + "/step.sh"}, dir + "/step.log",
                                   {{"PATH", bin + ":/usr/bin:/bin"},
                                    {"HETPOOL_SERVER", cluster_->address()},
                                    {"HETPOOL_INSECURE", "1"},
                                    {"CI_PIPELINE_ID", "4711"}});
  ASSERT_TRUE(child.ok()) << child.status();
  const auto status = (*child)->Wait(absl::Seconds(180));
  ASSERT_TRUE(status.has_value());
  std::ifstream log(dir + "/step.log");
  const std::string output((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 7) << *status << "\n" << output;
  EXPECT_NE(output.find("giving up: out of data on this shard"), std::string::npos) << output;  // the streamed logs
  std::ifstream report(dir + "/report.xml");
  const std::string xml((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("<failure type=\"NonZeroExit\""), std::string::npos) << xml;

  // deploy/ci/'s step script, which the GitHub Actions and GitLab CI jobs there run, does the same.
  auto script = ChildProcess::Spawn(
      {"/bin/bash", HETPOOL_SOURCE_DIR "/deploy/ci/submit-and-wait.sh", dir + "/job.json", "120s"}, dir + "/script.log",
      {{"PATH", bin + ":/usr/bin:/bin"},
       {"HETPOOL_SERVER", cluster_->address()},
       {"HETPOOL_INSECURE", "1"},
       {"HETPOOL_REQUEST_ID", "ci-script"},
       {"HETPOOL_JUNIT", dir + "/script-report.xml"}});
  ASSERT_TRUE(script.ok()) << script.status();
  const auto script_status = (*script)->Wait(absl::Seconds(180));
  ASSERT_TRUE(script_status.has_value());
  std::ifstream script_log(dir + "/script.log");
  const std::string script_output((std::istreambuf_iterator<char>(script_log)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(*script_status) && WEXITSTATUS(*script_status) == 7) << *script_status << "\n" << script_output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/script-report.xml")) << script_output;
}

TEST_F(CliTest, AgentPrintsItsInventory) {
  const std::string out_path = cluster_->dir() + "/print.out";
  auto agent = ChildProcess::Spawn(
      {HETPOOL_AGENT_BIN, "--backend", "sim", "--inventory", cluster_->InventoryPath(1), "--print-inventory"},
      out_path);
  ASSERT_TRUE(agent.ok());
  auto status = (*agent)->Wait(absl::Seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0);
  std::ifstream in(out_path);
  auto json = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  ASSERT_EQ(json["devices"].size(), 4u);
  EXPECT_EQ(json["devices"][2]["id"], "metax0");
  EXPECT_EQ(json["devices"][2]["links"][0]["kind"], "metaxlink");
  EXPECT_EQ(json["backend"], "sim");
  EXPECT_EQ(json["simulated"], true);

  const std::string bad = WriteFile("bad-inventory.json", R"({"devices": [{"vendor": "nvidia", "model": "A100"}]})");
  auto failing = ChildProcess::Spawn({HETPOOL_AGENT_BIN, "--backend", "sim", "--inventory", bad, "--print-inventory"},
                                     out_path + ".bad");
  ASSERT_TRUE(failing.ok());
  status = (*failing)->Wait(absl::Seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(*status, 0);
  std::ifstream err(out_path + ".bad");
  std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("inventory.devices[0].memory_mib: required"), std::string::npos) << text;
}

TEST_F(CliTest, TwoHalfCardJobsShareOneCard) {
  const std::string file = WriteFile("half.json", R"({
      "python": {"script": "deploy/examples/train_ddp.py", "args": ["--steps", "20", "--step-sleep", "0.05"]},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(",
      "nnodes": 1, "devices_per_node": 1, "device_milli": 500, "requirements": {"vendors": ["metax"]}})");
  std::string out;
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
    ids.push_back(out.substr(0, out.find('\n')));
  }
  auto first = cluster_->WaitForState(ids[0], pb::JOB_STATE_RUNNING, absl::Seconds(60));
  auto second = cluster_->WaitForState(ids[1], pb::JOB_STATE_RUNNING, absl::Seconds(60));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->placement(0).device_ids(0), second->placement(0).device_ids(0));
  EXPECT_EQ(first->placement(0).device_memory_mib(), 32768u);  // half of the C500's 64 GiB
  ASSERT_EQ(cluster_->RunCli({"devices", "--vendor", "metax"}, &out), 0) << out;
  EXPECT_NE(out.find(ids[0] + "," + ids[1] + " (1000/1000)"), std::string::npos) << out;
  for (const auto& id : ids) {
    EXPECT_EQ(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 0)
        << out << cluster_->Logs(id).value_or("(no logs)") << cluster_->DaemonLog();
  }
}

TEST_F(CliTest, ClusterViews) {
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"nodes"}, &out), 0) << out;
  EXPECT_NE(out.find("node-a"), std::string::npos);
  EXPECT_NE(out.find("2xmetax/MXC500"), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"devices", "--vendor", "cambricon"}, &out), 0) << out;
  EXPECT_NE(out.find("MLU370-X8"), std::string::npos) << out;
  EXPECT_EQ(out.find("H100"), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"fingerprints"}, &out), 0) << out;
  // Two nodes with two H100 each form one class; the MLU370 and C500 pairs one class each.
  EXPECT_NE(out.find("nvidia H100-SXM sm_90 79GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("node-a,node-b"), std::string::npos) << out;
  EXPECT_NE(out.find("metax MXC500 xcore1000 64GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("cambricon MLU370-X8 mtp_372 48GiB"), std::string::npos) << out;
  ASSERT_EQ(cluster_->RunCli({"-o", "json", "fingerprints"}, &out), 0) << out;
  auto classes = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(classes.is_discarded()) << out;
  EXPECT_EQ(classes["classes"].size(), 3u);
  ASSERT_EQ(cluster_->RunCli({"devices", "--node", "node-a"}, &out), 0) << out;
  EXPECT_NE(out.find("FINGERPRINT"), std::string::npos) << out;
  EXPECT_NE(out.find("fp-"), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"get", "job-999999"}, &out), 1);
  EXPECT_EQ(out, "hetpoolctl: NOT_FOUND: job 'job-999999' not found\n");
  EXPECT_EQ(cluster_->RunCli({"frobnicate"}, &out), 2);
  ASSERT_EQ(cluster_->RunCli({"--help"}, &out), 0);
  EXPECT_NE(out.find("hetpoolctl submit -f"), std::string::npos);
  ASSERT_EQ(cluster_->RunCli({"logs", "--help"}, &out), 0);
  EXPECT_NE(out.find("--rank"), std::string::npos) << out;
}

TEST_F(CliTest, PlanRanksTheLivePoolsClasses) {
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"plan", "--model", "llama-2-7b", "--tokens", "1e9", "-o", "json"}, &out), 0) << out;
  auto plan = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(plan.is_discarded()) << out;
  EXPECT_EQ(plan["total_params"], "6738415616");  // int64 is a string in protobuf JSON
  ASSERT_EQ(plan["plans"].size(), 3u) << out;
  // 16 bytes/param of model state (108 GB) needs two cards; the H100 pairs are NVLinked.
  const auto& best = plan["plans"][0];
  EXPECT_EQ(best["feasible"], true) << out;
  EXPECT_NE(best["label"].get<std::string>().find("H100"), std::string::npos) << out;
  EXPECT_EQ(best["tp"].get<int>() * best["pp"].get<int>() * best["dp"].get<int>(), 2) << out;
  EXPECT_EQ(best["class_total"], 4);
  ASSERT_EQ(cluster_->RunCli({"plan", "--model", "llama-2-7b", "--mode", "infer", "--batch", "8"}, &out), 0) << out;
  EXPECT_NE(out.find("TP1 PP1 DP1"), std::string::npos) << out;
  EXPECT_NE(out.find("yes "), std::string::npos) << out;

  EXPECT_EQ(cluster_->RunCli({"plan", "--model", "gpt-17"}, &out), 1);
  EXPECT_NE(out.find("NOT_FOUND: unknown model preset 'gpt-17'; known: llama-2-7b"), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"plan", "--model", "llama-2-7b", "--seq", "0"}, &out), 1);
  EXPECT_EQ(out, "hetpoolctl: INVALID_ARGUMENT: seq must be positive (got 0)\n");
  ASSERT_EQ(cluster_->RunCli({"plan", "--model", "llama-2-7b", "--precision", "fp8"}, &out), 0) << out;
  EXPECT_NE(out.find("cards do not support fp8"), std::string::npos) << out;  // the MLU370 and C500 rows
  const std::string bad_config = WriteFile("config.json", "{\"hidden_size\": 4096,");
  EXPECT_EQ(cluster_->RunCli({"plan", "--config", bad_config}, &out), 1);
  EXPECT_NE(out.find("config.json is not valid JSON"), std::string::npos) << out;
  // A 70B model does not fit the example pool; the answer says how close it comes (--wide: on
  // one line, not wrapped at 100 columns).
  EXPECT_EQ(cluster_->RunCli({"plan", "--model", "llama-2-70b", "--wide"}, &out), 1) << out;
  EXPECT_NE(out.find("FINGERPRINT"), std::string::npos) << out;
  EXPECT_NE(out.find("no feasible plan: needs 1.00 TiB of model state"), std::string::npos) << out;
  EXPECT_NE(out.find("the largest link group holds 159.3 GiB (2 x nvidia H100-SXM"), std::string::npos) << out;
}

TEST_F(CliTest, PlanOfflineAgainstPrintedInventoriesWithPrices) {
  std::vector<std::string> inventories;
  for (size_t i = 0; i < 2; ++i) {
    inventories.push_back(cluster_->dir() + "/offline-" + std::to_string(i) + ".json");
    auto agent = ChildProcess::Spawn({HETPOOL_AGENT_BIN, "--backend", "sim", "--inventory", cluster_->InventoryPath(i),
                                      "--node-name", "n" + std::to_string(i), "--print-inventory"},
                                     inventories.back());
    ASSERT_TRUE(agent.ok());
    ASSERT_EQ((*agent)->Wait(absl::Seconds(10)), std::optional<int>(0));
  }
  const std::string prices = WriteFile("prices.json", R"({"currency": "CNY", "baseline": "MLU370",
      "classes": [{"match": "H100", "price_per_card_hour": 30}, {"match": "MLU370", "price_per_card_hour": 6}]})");
  // No daemon at this address: offline planning needs none.
  std::vector<std::string> argv = {
      HETPOOLCTL_BIN, "--server", "127.0.0.1:1", "-o",   "json",     "plan", "--model",  "qwen2-7b", "--mode", "infer",
      "--batch",      "4",        "--context",   "8192", "--tokens", "1e8",  "--prices", prices,     "--pool"};
  argv.insert(argv.end(), inventories.begin(), inventories.end());
  const std::string out_path = cluster_->dir() + "/offline-plan.out";
  auto cli = ChildProcess::Spawn(argv, out_path);
  ASSERT_TRUE(cli.ok());
  ASSERT_EQ((*cli)->Wait(absl::Seconds(30)), std::optional<int>(0));
  std::ifstream in(out_path);
  auto plan = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(plan.is_discarded());
  EXPECT_EQ(plan["currency"], "CNY");
  EXPECT_NE(plan["baseline"].get<std::string>().find("MLU370"), std::string::npos);
  ASSERT_EQ(plan["plans"].size(), 3u);
  // Offline, every healthy card counts as free; priced classes carry a cost and cost-performance.
  for (const auto& row : plan["plans"]) {
    if (row["label"].get<std::string>().find("MXC500") != std::string::npos) continue;  // not priced
    EXPECT_EQ(row["feasible"], true) << row;
    EXPECT_EQ(row["available_now"], true) << row;
    EXPECT_GT(row["cost"].get<double>(), 0) << row;
    EXPECT_GT(row["cost_performance"].get<double>(), 0) << row;
  }
}

TEST_F(CliTest, PendingJobSaysWhyItWaits) {
  std::string out;
  for (const char* node : {"node-a", "node-b"}) ASSERT_EQ(cluster_->RunCli({"drain", node}, &out), 0) << out;
  const std::string file = WriteFile("waits.json", R"({"command": ["/bin/true"], "working_dir": "/tmp",
      "nnodes": 1, "devices_per_node": 2, "requirements": {"vendors": ["nvidia"], "precisions": ["bf16"]}})");
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  auto pending = cluster_->WaitFor(
      id, [](const pb::Job& j) { return j.has_pending(); }, absl::Seconds(20));
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_FALSE(pending->pending().never_fits());
  EXPECT_EQ(pending->pending().needs(), "1 node x 2 devices of one vendor (bf16, nvidia)");
  EXPECT_EQ(pending->pending().nodes_rejected().at("NodeSchedulable"), 2);
  ASSERT_EQ(cluster_->RunCli({"get", id}, &out), 0) << out;
  EXPECT_NE(out.find("waiting:     for capacity"), std::string::npos) << out;
  EXPECT_NE(out.find("turned away by: NodeSchedulable 2 (nodes)"), std::string::npos) << out;
  for (const char* node : {"node-a", "node-b"}) ASSERT_EQ(cluster_->RunCli({"undrain", node}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"wait", id, "--timeout", "60s"}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"get", id, "-o", "json"}, &out), 0) << out;
  EXPECT_EQ(out.find("\"pending\""), std::string::npos) << out;  // cleared once placed
}

TEST_F(CliTest, SubmitByModelRunsThePlannedLayout) {
  const std::string file = WriteFile("by-model.json", R"({
      "name": "by-model",
      "python": {"script": "deploy/examples/train_ddp.py", "args": ["--steps", "3"]},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(",
      "model": {"model": {"preset": "llama-2-7b"}, "workload": {"mode": "train", "precision": "bf16",
                "seq": 2048, "micro_batch": 2}, "objective": "time"}})");
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  ASSERT_EQ(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"get", id, "-o", "json"}, &out), 0) << out;
  auto job = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(job.is_discarded()) << out;
  // The plan chose two NVLinked H100 of one node with tensor parallel 2, and says so everywhere.
  EXPECT_EQ(job["plan"]["tp"], 2) << out;
  EXPECT_EQ(job["spec"]["devices_per_node"], 2);
  EXPECT_EQ(job["spec"]["nnodes"], 1);
  EXPECT_EQ(job["vendor"], "nvidia");
  EXPECT_EQ(job["spec"]["requirements"]["fingerprints"][0], job["plan"]["fingerprint"]);
  EXPECT_EQ(job["launch_plan"][0]["env"]["HETPOOL_TP"], "2");
  EXPECT_EQ(job["launch_plan"][0]["env"]["HETPOOL_MICRO_BATCH"], "2");
  auto logs = cluster_->Logs(id);
  ASSERT_TRUE(logs.ok());
  EXPECT_NE(logs->find("layout tp=2 pp=1 dp=1 zero=0 micro_batch=2"), std::string::npos) << *logs;

  // A model section with explicit devices, or one nothing can hold, is refused and stores nothing.
  const std::string both = WriteFile("both.json", R"({"command": ["/bin/true"], "nnodes": 1, "devices_per_node": 1,
      "model": {"model": {"preset": "llama-2-7b"}}})");
  EXPECT_EQ(cluster_->RunCli({"submit", "-f", both}, &out), 1);
  EXPECT_NE(out.find("model: leave nnodes, devices_per_node and device_milli unset"), std::string::npos) << out;
  const std::string huge = WriteFile("huge.json", R"({"command": ["/bin/true"],
      "model": {"model": {"preset": "llama-2-70b"}}})");
  EXPECT_EQ(cluster_->RunCli({"submit", "-f", huge}, &out), 1);
  EXPECT_NE(out.find("FAILED_PRECONDITION: model: no class of the pool can run it; needs 1.00 TiB"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace hetpool::testing

namespace hetpool::testing {
namespace {

TEST_F(CliTest, UsageReportsCardHoursAsTableJsonAndCsv) {
  const std::string file = WriteFile("usage.json", R"({"name": "usage-probe", "user": "ursula", "group": "acct",
      "python": {"script": "deploy/examples/train_ddp.py", "args": ["--steps", "5", "--step-sleep", "0.2"]},
      "working_dir": ")" HETPOOL_SOURCE_DIR R"(", "nnodes": 1, "devices_per_node": 1, "device_milli": 500,
      "requirements": {"vendors": ["nvidia"]}})");
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"submit", "-f", file}, &out), 0) << out;
  const std::string id = out.substr(0, out.find('\n'));
  ASSERT_EQ(cluster_->RunCli({"wait", id, "--timeout", "120s"}, &out), 0) << out;

  ASSERT_EQ(cluster_->RunCli({"-o", "json", "usage", "--since", "1h", "--by", "user"}, &out), 0) << out;
  auto json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  bool found = false;
  for (const auto& row : json["rows"]) {
    if (row["key"] != "ursula") continue;
    found = true;
    EXPECT_EQ(row["group"], "acct");
    // Half a card for about a second of running: counted by its fraction, and no more.
    EXPECT_GT(row["card_hours"].get<double>(), 0.0);
    EXPECT_LT(row["card_hours"].get<double>(), 0.5 * 60 / 3600.0);
  }
  EXPECT_TRUE(found) << out;

  ASSERT_EQ(cluster_->RunCli({"usage", "--since", "1h", "--by", "class", "-o", "csv"}, &out), 0) << out;
  EXPECT_EQ(out.rfind("key,user,group,class,fingerprint,jobs,card_hours,cost,currency\n", 0), 0u) << out;
  EXPECT_NE(out.find("nvidia H100-SXM"), std::string::npos) << out;

  ASSERT_EQ(cluster_->RunCli({"usage", "--since", "2026-01-01", "--by", "job"}, &out), 0) << out;
  EXPECT_NE(out.find(id), std::string::npos) << out;
  EXPECT_NE(out.find("CARD-HOURS"), std::string::npos) << out;
  EXPECT_EQ(cluster_->RunCli({"usage", "--since", "last tuesday"}, &out), 2) << out;
  EXPECT_EQ(cluster_->RunCli({"usage", "--by", "team"}, &out), 1) << out;
  EXPECT_NE(out.find("INVALID_ARGUMENT: by: 'team'"), std::string::npos) << out;
}

}  // namespace
}  // namespace hetpool::testing
