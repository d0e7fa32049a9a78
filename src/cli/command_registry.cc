#include "src/cli/command_registry.h"

#include <cstdlib>
#include <algorithm>
#include <iostream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/completion.h"
#include "src/cli/terminal_output.h"

namespace hetpool::cli {
namespace {

int PrintCompletion(Client&, const Invocation&, const NoOptions&) {
  std::cout << BashCompletion();
  return 0;
}

CommandEntry CompletionCommand() {
  return {.name = "completion",
          .synopsis = "bash",
          .summary = "print the bash completion script",
          .details = "Made from the same list of commands and flags as this help.",
          .examples = {"hetpoolctl completion bash > ~/.local/share/bash-completion/completions/hetpoolctl"},
          .operands = Operands::kWord,
          .words = {"bash"},
          .make = Make<NoOptions>(nullptr, PrintCompletion)};
}

// "get takes one job id": what the entry's operands are, said when they are not what was given.
std::optional<std::string> CheckOperands(const CommandEntry& entry, const std::vector<std::string>& operands) {
  switch (entry.operands) {
    case Operands::kNone:
      if (operands.empty()) return std::nullopt;
      return absl::StrCat(entry.name, " takes no positional arguments (got '", operands[0], "')");
    case Operands::kJobId:
      if (operands.size() == 1) return std::nullopt;
      return absl::StrCat(entry.name, " takes one job id");
    case Operands::kNodeName:
      if (operands.size() == 1) return std::nullopt;
      return absl::StrCat(entry.name, " takes one node name");
    case Operands::kNodeCard:
      if (operands.size() == 2) return std::nullopt;
      return absl::StrCat(entry.name, " takes a node name and a device id (node-a nvidia2)");
    case Operands::kWord:
      if (operands.size() == 1 && std::find(entry.words.begin(), entry.words.end(), operands[0]) != entry.words.end()) {
        return std::nullopt;
      }
      return absl::StrCat(entry.name, " takes one of: ", absl::StrJoin(entry.words, ", "));
    case Operands::kFiles: return std::nullopt;
  }
  return std::nullopt;
}

// The entry named by the words at the start of `words` ("admin", "token"), and how many it used.
absl::StatusOr<std::pair<const CommandEntry*, size_t>> FindCommand(const std::vector<std::string>& words) {
  const std::string& first = words[0];
  std::vector<std::string> subcommands;
  for (const CommandEntry& entry : Commands()) {
    if (entry.name == first) return std::make_pair(&entry, size_t{1});
    if (absl::StartsWith(entry.name, first + " ")) subcommands.push_back(entry.name.substr(first.size() + 1));
  }
  if (subcommands.empty()) return absl::InvalidArgumentError(absl::StrCat("unknown command '", first, "'"));
  const std::string list = absl::StrJoin(subcommands, ", ");
  if (words.size() < 2 || absl::StartsWith(words[1], "-")) {
    return absl::InvalidArgumentError(absl::StrCat(first, " takes a subcommand: ", list));
  }
  for (const CommandEntry& entry : Commands()) {
    if (entry.name == first + " " + words[1]) return std::make_pair(&entry, size_t{2});
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", first, " subcommand '", words[1], "' (", list, ")"));
}

bool AsksForHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

}  // namespace

GlobalOptions GlobalOptionsFromEnvironment() {
  GlobalOptions o;
  if (const char* env = getenv("HETPOOL_SERVER"); env && *env) o.globals.server = env;
  if (const char* env = getenv("HETPOOL_TOKEN"); env && *env) o.globals.token = env;
  if (const char* env = getenv("HETPOOL_TLS_CA"); env && *env) o.globals.tls.ca = env;
  if (const char* env = getenv("HETPOOL_INSECURE"); env && std::string(env) == "1") o.globals.insecure = true;
  return o;
}

void DeclareGlobalFlags(FlagSet& flags, GlobalOptions* o) {
  Globals& g = o->globals;
  auto free = [&](const std::string& name) { return !flags.Has(name); };
  if (free("server")) {
    flags.String("server", &g.server,
                 "hetpoold's address ($HETPOOL_SERVER, default 127.0.0.1:7070); several, comma-separated, for "
                 "replicas on etcd: the leader is used");
  }
  if (free("tls-ca")) {
    flags.String("tls-ca", &g.tls.ca, "the pool's CA certificate ($HETPOOL_TLS_CA)");
    flags.CompleteAs("tls-ca", ValueCompletion::kFile);
  }
  if (free("tls-cert")) {
    flags.String("tls-cert", &g.tls.cert, "a client certificate, for a daemon that asks for one");
    flags.CompleteAs("tls-cert", ValueCompletion::kFile);
  }
  if (free("tls-key")) {
    flags.String("tls-key", &g.tls.key, "the client certificate's key");
    flags.CompleteAs("tls-key", ValueCompletion::kFile);
  }
  if (free("token")) flags.String("token", &g.token, "your bearer token ($HETPOOL_TOKEN)");
  if (free("token-file")) {
    flags.String("token-file", &o->token_file, "a file holding your bearer token");
    flags.CompleteAs("token-file", ValueCompletion::kFile);
  }
  if (free("insecure")) {
    flags.Bool("insecure", &g.insecure, "plaintext, for a daemon started with --insecure ($HETPOOL_INSECURE=1)");
  }
  if (free("output")) {
    flags.String("output", &g.output, "table (default) or json; csv for usage");
    flags.Alias("-o", "output");
    flags.Values("output", {"table", "json", "csv"});
  }
  if (free("timeout")) flags.Duration("timeout", &g.timeout, "how long one call may take (default 30s)");
}

const FlagSet& GlobalFlagsForHelp() {
  static const FlagSet* flags = [] {
    static GlobalOptions unused;
    auto* set = new FlagSet("");
    DeclareGlobalFlags(*set, &unused);
    return set;
  }();
  return *flags;
}

const std::vector<CommandEntry>& Commands() {
  static const std::vector<CommandEntry>* commands = [] {
    auto* all = new std::vector<CommandEntry>();
    for (auto group : {JobCommands(), ClusterCommands(), PlanCommands(), UsageCommands(), AdminCommands()}) {
      for (CommandEntry& entry : group) all->push_back(std::move(entry));
    }
    all->push_back(CompletionCommand());
    return all;
  }();
  return *commands;
}

std::vector<std::string> ParentWords() {
  std::vector<std::string> parents;
  for (const CommandEntry& entry : Commands()) {
    const size_t space = entry.name.find(' ');
    if (space == std::string::npos) continue;
    const std::string parent = entry.name.substr(0, space);
    if (std::find(parents.begin(), parents.end(), parent) == parents.end()) parents.push_back(parent);
  }
  return parents;
}

std::string Overview() {
  std::string out =
      "hetpoolctl: submit and follow jobs on a hetpool GPU pool.\n\n"
      "Usage: hetpoolctl [global flags] COMMAND [flags] [arguments]\n\n"
      "Commands (each with an example):\n";
  constexpr size_t kColumn = 24;
  for (const CommandEntry& entry : Commands()) {
    std::string head = absl::StrCat("  ", entry.name, entry.synopsis.empty() ? "" : " ", entry.synopsis);
    head += head.size() + 2 <= kColumn ? std::string(kColumn - head.size(), ' ') : "\n" + std::string(kColumn, ' ');
    absl::StrAppend(&out, head, entry.summary, "\n", std::string(kColumn, ' '), entry.examples.front(), "\n");
  }
  absl::StrAppend(&out, "\nGlobal flags (before or after the command):\n", GlobalFlagsForHelp().FlagHelp(),
                  "\nRun 'hetpoolctl COMMAND --help' for a command's flags.\n");
  return out;
}

std::string CommandHelp(const CommandEntry& entry) {
  auto command = entry.make();
  std::string usage = absl::StrCat("hetpoolctl ", entry.name, entry.synopsis.empty() ? "" : " ", entry.synopsis);
  FlagSet own("");
  command->DeclareFlags(own);
  if (!own.Describe().empty()) usage += " [flags]";
  absl::StrAppend(&usage, "\n", entry.summary, "\n");
  if (!entry.details.empty()) absl::StrAppend(&usage, entry.details, "\n");
  if (entry.examples.size() == 1) {
    absl::StrAppend(&usage, "Example: ", entry.examples[0], "\n");
  } else {
    absl::StrAppend(&usage, "Examples:\n");
    for (const std::string& example : entry.examples) absl::StrAppend(&usage, "  ", example, "\n");
  }
  if (!own.Describe().empty()) absl::StrAppend(&usage, "\nFlags:\n", own.FlagHelp());
  std::vector<std::string> names;
  for (const FlagDescription& flag : GlobalFlagsForHelp().Describe()) {
    if (!own.Has(flag.name)) names.push_back(flag.aliases.empty() ? "--" + flag.name : flag.aliases[0]);
  }
  absl::StrAppend(&usage, "\nGlobal flags (", absl::StrJoin(names, ", "),
                  ") may come before or after the command; hetpoolctl --help says what they do.\n");
  return usage;
}

int RunCommandLine(const std::vector<std::string>& args) {
  GlobalOptions options = GlobalOptionsFromEnvironment();
  FlagSet leading("");
  DeclareGlobalFlags(leading, &options);
  auto words = leading.ParseLeading(args);
  if (!words.ok()) {
    if (absl::IsCancelled(words.status())) {  // --help before any command
      std::cout << Overview();
      return 0;
    }
    return Usage(std::string(words.status().message()));
  }
  if (words->empty()) {
    std::cerr << Overview();
    return kExitUsage;
  }
  auto found = FindCommand(*words);
  if (!found.ok()) return Usage(std::string(found.status().message()));
  const auto [entry, used] = *found;
  const std::vector<std::string> rest(words->begin() + static_cast<long>(used), words->end());
  if (AsksForHelp(rest)) {
    std::cout << CommandHelp(*entry);
    return 0;
  }
  auto command = entry->make();
  FlagSet flags(CommandHelp(*entry));
  command->DeclareFlags(flags);
  DeclareGlobalFlags(flags, &options);
  auto operands = flags.Parse(rest);
  if (!operands.ok()) return CommandUsage(entry->name, std::string(operands.status().message()));
  if (auto wrong = CheckOperands(*entry, *operands)) return CommandUsage(entry->name, *wrong);
  Globals& globals = options.globals;
  if (leading.WasSet("token") || flags.WasSet("token")) {
    // argv is in /proc/PID/cmdline, which every local user reads (ps).
    std::cerr << "hetpoolctl: warning: --token on the command line is visible to every user of this machine (ps); "
                 "use --token-file or $HETPOOL_TOKEN\n";
  }
  if (!options.token_file.empty()) {
    auto text = ReadSecretFile(options.token_file);
    if (!text.ok()) return Error(text.status());
    globals.token = std::string(absl::StripAsciiWhitespace(*text));
  }
  if (globals.output != "table" && globals.output != "json" && globals.output != "csv") {
    return CommandUsage(entry->name, "-o takes table, json or csv");
  }
  if (globals.output == "csv" && !entry->csv_output)
    return CommandUsage(entry->name, "-o csv is for usage; use -o json");
  Client client(globals);
  // Names, reasons, events and job output may hold what a terminal would act on: shown escaped
  // (JSON escapes them itself and stays exact; `logs --raw` writes past this).
  std::optional<EscapedTerminalOutput> escaped;
  if (globals.output != "json") escaped.emplace();
  return command->Run(client, Invocation{*operands, flags, entry->name});
}

}  // namespace hetpool::cli
