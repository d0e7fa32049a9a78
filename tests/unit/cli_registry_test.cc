// hetpoolctl's command registry: the overview, each command's --help, its flag parsing and the
// bash completion script come from the one list of commands, and the checked-in completion file
// is that list's output.
#include "src/cli/command_registry.h"

#include <stdio.h>
#include <sys/wait.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "src/cli/completion.h"

namespace hetpool::cli {
namespace {

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(HETPOOL_SOURCE_DIR_FOR_TESTS) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CliRegistry, TheCheckedInCompletionFileIsTheRegistrysOutput) {
  EXPECT_EQ(ReadSource("deploy/completion/hetpoolctl.bash"), BashCompletion())
      << "deploy/completion/hetpoolctl.bash is out of date: run "
         "build/src/hetpoolctl completion bash > deploy/completion/hetpoolctl.bash";
}

TEST(CliRegistry, EveryCommandIsInTheOverviewAndHasHelpWithAnExampleAndItsFlags) {
  const std::string overview = Overview();
  std::set<std::string> names;
  for (const CommandEntry& entry : Commands()) {
    EXPECT_TRUE(names.insert(entry.name).second) << "two commands named " << entry.name;
    ASSERT_FALSE(entry.examples.empty()) << entry.name;
    EXPECT_TRUE(absl::StrContains(overview, absl::StrCat("  ", entry.name))) << entry.name;
    EXPECT_TRUE(absl::StrContains(overview, entry.examples.front())) << entry.name;
    const std::string help = CommandHelp(entry);
    EXPECT_TRUE(absl::StartsWith(help, absl::StrCat("hetpoolctl ", entry.name))) << help;
    EXPECT_TRUE(absl::StrContains(help, "Example")) << help;
    for (const std::string& example : entry.examples) {
      EXPECT_TRUE(absl::StartsWith(example, absl::StrCat("hetpoolctl ", entry.name))) << example;
    }
    FlagSet flags("");
    entry.make()->DeclareFlags(flags);
    for (const FlagDescription& flag : flags.Describe()) {
      EXPECT_TRUE(absl::StrContains(help, "--" + flag.name)) << entry.name << " --" << flag.name;
    }
  }
  EXPECT_TRUE(absl::StrContains(overview, "--tls-ca")) << overview;
}

TEST(CliRegistry, ACommandsOwnFlagWinsOverTheGlobalOneOfThatName) {
  const CommandEntry* wait = nullptr;
  for (const CommandEntry& entry : Commands()) {
    if (entry.name == "wait") wait = &entry;
  }
  ASSERT_NE(wait, nullptr);
  auto command = wait->make();
  FlagSet flags("");
  command->DeclareFlags(flags);
  GlobalOptions options;
  DeclareGlobalFlags(flags, &options);
  ASSERT_TRUE(flags.Parse({"job-1", "--timeout", "10m", "--server", "10.0.0.1:7070", "-o", "json"}).ok());
  EXPECT_EQ(options.globals.timeout, absl::Seconds(30)) << "the call timeout is not wait's --timeout";
  EXPECT_EQ(options.globals.server, "10.0.0.1:7070");
  EXPECT_EQ(options.globals.output, "json");
}

// Runs the command line, returning its exit status and what it printed on stdout and stderr.
int RunCli(const std::vector<std::string>& args, std::string* out) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = RunCommandLine(args);
  *out = ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  return code;
}

TEST(CliRegistry, OperandsAndSubcommandsAreCheckedBeforeAnythingIsSent) {
  std::string out;
  EXPECT_EQ(RunCli({"get"}, &out), kExitUsage);
  EXPECT_EQ(out, "hetpoolctl: get takes one job id (see hetpoolctl get --help)\n");
  EXPECT_EQ(RunCli({"drain", "a", "b"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "drain takes one node name")) << out;
  EXPECT_EQ(RunCli({"nodes", "extra"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "nodes takes no positional arguments (got 'extra')")) << out;
  EXPECT_EQ(RunCli({"admin"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "admin takes a subcommand: token, revoke")) << out;
  EXPECT_EQ(RunCli({"admin", "rotate"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "unknown admin subcommand 'rotate' (token, revoke)")) << out;
  EXPECT_EQ(RunCli({"frobnicate"}, &out), kExitUsage);
  EXPECT_EQ(RunCli({"completion", "zsh"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "completion takes one of: bash")) << out;
  EXPECT_EQ(RunCli({"list", "--bogus"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "unknown flag --bogus")) << out;
  EXPECT_EQ(RunCli({"nodes", "-o", "csv"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "-o csv is for usage")) << out;
  // Global flags after the command, and its help wherever --help is.
  EXPECT_EQ(RunCli({"get", "--insecure", "--timeout", "1s"}, &out), kExitUsage);
  EXPECT_TRUE(absl::StrContains(out, "get takes one job id")) << out;
  EXPECT_EQ(RunCli({"--insecure", "admin", "token", "--help"}, &out), 0);
  EXPECT_TRUE(absl::StartsWith(out, "hetpoolctl admin token --file FILE --user NAME [flags]")) << out;
  EXPECT_EQ(RunCli({"--help"}, &out), 0);
  EXPECT_EQ(out, Overview());
}

// What the completion script offers for a command line whose last word is being typed.
std::string Complete(const std::vector<std::string>& words) {
  const std::string script = std::string(HETPOOL_SOURCE_DIR_FOR_TESTS) + "/deploy/completion/hetpoolctl.bash";
  std::string command = absl::StrCat(
      "bash -c 'source \"$1\"; shift; COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _hetpoolctl; "
      "echo \"${COMPREPLY[*]}\"' _ ",
      script, " hetpoolctl");
  for (const std::string& w : words) absl::StrAppend(&command, " '", w, "'");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "<popen failed>";
  std::string out;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  pclose(pipe);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(CliRegistry, TheCompletionScriptCompletesCommandsSubcommandsFlagsAndValues) {
  EXPECT_EQ(Complete({"su"}), "submit");
  EXPECT_EQ(Complete({"--insecure", "-o", "j"}), "json");
  EXPECT_EQ(Complete({"admin", "t"}), "token");
  EXPECT_EQ(Complete({"admin", "token", "--role", "op"}), "operator");
  EXPECT_EQ(Complete({"admin", "revoke", "--u"}), "--user");
  EXPECT_EQ(Complete({"list", "--state", "f"}), "failed");
  EXPECT_EQ(Complete({"--server", "h:1", "usage", "--by", "gr"}), "group");
  EXPECT_EQ(Complete({"plan", "--precision", "fp1"}), "fp16");
  EXPECT_EQ(Complete({"completion", "b"}), "bash");
  EXPECT_EQ(Complete({"wait", "--j"}), "--job-exit-code --junit");
  // A global flag's value after the command; a free value is not offered flags.
  EXPECT_EQ(Complete({"list", "-o", "t"}), "table");
  EXPECT_EQ(Complete({"list", "--user", "--"}), "");
}

}  // namespace
}  // namespace hetpool::cli
