// Running a short program of the agent's own: the container runtime's queries and the
// operator's health check. No shell; stdin on /dev/null; its own process group with no signal
// blocked (the agent blocks the shutdown signals); its output read through a pipe and bounded;
// and, when it outlives its patience, its whole group killed.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace hetpool::agent {

struct ProgramRunOptions {
  // The program's environment; nullopt: the agent's own.
  std::optional<std::map<std::string, std::string>> env;
  bool with_stderr = false;  // stderr into the output too; else to /dev/null
  size_t keep_bytes = 8 << 20;
  bool keep_tail = false;  // keep the last `keep_bytes` of the output; else the first
};

struct ProgramOutput {
  enum class End { kExited, kNotStarted, kTimedOut };
  End end = End::kNotStarted;
  int exit_code = -1;  // kExited: the exit status, or 128 + the signal that ended it
  std::string output;
  std::string error;  // kNotStarted: why
};

ProgramOutput RunProgram(const std::vector<std::string>& args, absl::Duration patience,
                         const ProgramRunOptions& options = {});

}  // namespace hetpool::agent
