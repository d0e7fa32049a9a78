// Start-up steps every hetpool server program shares: flags plus an optional JSON config file,
// and blocking the shutdown signals so one thread can sigwait() for them.
#pragma once

#include <signal.h>

#include <optional>
#include <string>

#include "src/common/flags.h"

namespace hetpool {

// Parses argv[1..] and, when *config_path is set by then, applies that JSON config (command-line
// flags win). Returns nullopt to go on, or the exit code: 0 after --help, 2 after an error (printed
// as "<program>: message").
std::optional<int> ParseProgramFlags(FlagSet& flags, int argc, char** argv, const std::string& program,
                                     const std::string* config_path);

// Blocks SIGTERM and SIGINT in the calling thread (and every thread it starts later) and ignores
// SIGPIPE. Returns the set to pass to sigwait(). Call before starting any thread.
sigset_t BlockShutdownSignals();

}  // namespace hetpool
