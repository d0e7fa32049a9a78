#include "src/common/program.h"

#include <pthread.h>

#include <iostream>

#include "absl/strings/str_cat.h"

namespace hetpool {

std::optional<int> ParseProgramFlags(FlagSet& flags, int argc, char** argv, const std::string& program,
                                     const std::string* config_path) {
  auto fail = [&program](absl::string_view message) {
    std::cerr << program << ": " << message << "\n";
    return 2;
  };
  auto positional = flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!positional.ok()) {
    if (absl::IsCancelled(positional.status())) {
      std::cout << positional.status().message();
      return 0;
    }
    return fail(absl::StrCat(positional.status().message(), " (see ", program, " --help)"));
  }
  if (!positional->empty())
    return fail(absl::StrCat("unexpected argument ", (*positional)[0], " (see ", program, " --help)"));
  if (config_path != nullptr && !config_path->empty()) {
    auto json = ReadJsonFile(*config_path);
    if (!json.ok()) return fail(json.status().message());
    if (auto s = flags.ApplyConfig(*json); !s.ok()) return fail(s.message());
  }
  return std::nullopt;
}

sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

}  // namespace hetpool
