// The bash completion script, made from the command registry: command names and subcommands,
// global and per-command flags, the values a flag lists (FlagSet::Values), files, and job ids
// and node names asked of the pool. deploy/completion/hetpoolctl.bash is this output, checked in
// for packages; a test fails when they differ.
#pragma once

#include <string>

namespace hetpool::cli {

std::string BashCompletion();

}  // namespace hetpool::cli
