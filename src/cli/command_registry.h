// hetpoolctl's one list of commands and what is made from it: the overview (--help), each
// command's --help, the parsing of global and command flags, and the bash completion script
// (completion.h). A command is added in one place, its group's entries (command.h).
#pragma once

#include <string>
#include <vector>

#include "src/cli/command.h"

namespace hetpool::cli {

// Global flags: the connection, output format and call timeout; read from the environment
// first ($HETPOOL_SERVER, $HETPOOL_TOKEN, $HETPOOL_TLS_CA, $HETPOOL_INSECURE=1).
struct GlobalOptions {
  Globals globals;
  std::string token_file;
};
GlobalOptions GlobalOptionsFromEnvironment();
// Declares the global flags a FlagSet does not already have: after the command its own flags win
// (wait's --timeout is how long to wait, not how long one call may take).
void DeclareGlobalFlags(FlagSet& flags, GlobalOptions* options);
// The global flags alone, to describe them (help, completion); parsing with it changes nothing.
const FlagSet& GlobalFlagsForHelp();

// Every command, in overview order.
const std::vector<CommandEntry>& Commands();

// The words that start a subcommand ("admin" of "admin token"), in overview order.
std::vector<std::string> ParentWords();

std::string Overview();
std::string CommandHelp(const CommandEntry& entry);

// The whole command line (without the program name) to an exit status.
int RunCommandLine(const std::vector<std::string>& args);

}  // namespace hetpool::cli
