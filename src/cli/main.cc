// hetpoolctl: the command-line client for researchers, CI pipelines and operators.
// Every command is one or two RPCs; errors print one line and exit non-zero. The commands, their
// flags and help are in the registry (command_registry.h).
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
  return hetpool::cli::RunCommandLine(std::vector<std::string>(argv + 1, argv + argc));
}
