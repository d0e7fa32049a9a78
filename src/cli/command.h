// One hetpoolctl command as the registry (command_registry.h) sees it: what it is called, what it
// takes, how it is shown in the overview and its --help, and the object that declares its flags
// and runs it. Usage, per-command help, flag parsing and the bash completion script are all made
// from these entries, so they cannot drift apart.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/cli/client.h"
#include "src/common/flags.h"

namespace hetpool::cli {

// The positional arguments a command takes; the registry checks their number and the completion
// script offers them.
enum class Operands {
  kNone,      // none
  kJobId,     // exactly one job id
  kNodeName,  // exactly one node name
  kNodeCard,  // a node name and one of its device ids
  kFiles,     // any number of files (the command checks them)
  kWord,      // exactly one of CommandEntry::words
};

// What a command was given, after the registry parsed the command line.
struct Invocation {
  std::vector<std::string> operands;
  const FlagSet& flags;  // WasSet() tells a flag given as its default from one not given
  std::string command;   // its name, "admin token"
  // A usage mistake: one line pointing at the command's --help, and the usage exit code.
  int Usage(const std::string& message) const { return CommandUsage(command, message); }
};

class Command {
 public:
  virtual ~Command() = default;
  // Binds the command's flags to its members. Called on a fresh object for each FlagSet.
  virtual void DeclareFlags(FlagSet&) {}
  virtual int Run(Client& client, const Invocation& invocation) = 0;
};

struct CommandEntry {
  std::string name;                   // "submit"; a subcommand is "admin token"
  std::string synopsis;               // what follows the name: "ID", "-f FILE"
  std::string summary;                // one line for the overview
  std::string details;                // more lines for --help (may be empty)
  std::vector<std::string> examples;  // whole command lines; the first is shown in the overview
  Operands operands = Operands::kNone;
  std::vector<std::string> words;  // for Operands::kWord
  bool csv_output = false;         // accepts -o csv
  std::function<std::unique_ptr<Command>()> make;
};

// Each group of commands lists its entries; the registry joins them in overview order.
std::vector<CommandEntry> JobCommands();      // job_commands.cc
std::vector<CommandEntry> ClusterCommands();  // cluster_commands.cc
std::vector<CommandEntry> PlanCommands();     // plan_command.cc
std::vector<CommandEntry> UsageCommands();    // usage_command.cc
std::vector<CommandEntry> AdminCommands();    // admin_command.cc

// A Command from a function and a flag declaration, for commands whose flags are few.
template <typename Options>
class FunctionCommand : public Command {
 public:
  using Declare = void (*)(FlagSet&, Options*);
  using Runner = int (*)(Client&, const Invocation&, const Options&);
  FunctionCommand(Declare declare, Runner run) : declare_(declare), run_(run) {}
  void DeclareFlags(FlagSet& flags) override {
    if (declare_ != nullptr) declare_(flags, &options_);
  }
  int Run(Client& client, const Invocation& invocation) override { return run_(client, invocation, options_); }

 private:
  Declare declare_;
  Runner run_;
  Options options_;
};

// The options of a command without flags of its own (its Declare is nullptr).
struct NoOptions {};

// make() for an entry: `Make<Options>(DeclareFn, RunFn)`.
template <typename Options>
std::function<std::unique_ptr<Command>()> Make(typename FunctionCommand<Options>::Declare declare,
                                               typename FunctionCommand<Options>::Runner run) {
  return [declare, run] { return std::make_unique<FunctionCommand<Options>>(declare, run); };
}

}  // namespace hetpool::cli
