// hetpoolctl: the command-line client for researchers, CI pipelines and operators.
// Every command is one or two RPCs; errors print one line and exit non-zero. The commands, their
// flags and help are in the registry (command_registry.h).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "grpc/support/log.h"
#include "src/cli/command_registry.h"

namespace {

// gRPC core prints its own lines on stderr ("E1130 ... Handshake failed"); the CLI says what went
// wrong itself (Client::Failed), so they only confuse.
void SilenceGrpcLogs(gpr_log_func_args*) {}

}  // namespace

int main(int argc, char** argv) {
  gpr_set_log_function(SilenceGrpcLogs);
  const int exit_code = hetpool::cli::RunCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  // Ends without tearing gRPC down: its shutdown joins the threads it started (executor, timers,
  // event engine) and frees what the kernel frees anyway, a fifth of a submission's CPU. What the
  // command wrote is flushed first; nothing else of the CLI's lives past the process.
#if defined(__SANITIZE_ADDRESS__)
  return exit_code;  // the sanitizers' leak check runs at a normal exit
#else
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(exit_code);
#endif
}
