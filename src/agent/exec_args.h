// argv and envp for execve, made before a fork (after it, a child may make only async-signal-safe
// calls, so nothing may be allocated there). The strings they point into live as long as this.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hetpool::agent {

class ExecArgs {
 public:
  ExecArgs(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) : args_(args) {
    for (const auto& [k, v] : env) env_strings_.push_back(k + "=" + v);
    for (auto& a : args_) argv_.push_back(a.data());
    argv_.push_back(nullptr);
    for (auto& e : env_strings_) envp_.push_back(e.data());
    envp_.push_back(nullptr);
    // A program named without a '/' ("python3", "true") is looked for on the process's own PATH,
    // as execvp would (and as torchrun --no_python did): each directory's candidate is made here,
    // and the child tries them in turn.
    const std::string& program = args_.empty() ? std::string() : args_[0];
    auto path = env.find("PATH");
    if (program.find('/') == std::string::npos && path != env.end()) {
      size_t from = 0;
      while (from <= path->second.size()) {
        size_t colon = path->second.find(':', from);
        if (colon == std::string::npos) colon = path->second.size();
        const std::string dir = path->second.substr(from, colon - from);
        candidates_.push_back((dir.empty() ? std::string(".") : dir) + "/" + program);
        from = colon + 1;
      }
    }
    if (candidates_.empty()) candidates_.push_back(program);
  }
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;

  const char* path() const { return argv_[0]; }
  // Where the program may be, in the order to try (one entry when argv[0] names a path).
  size_t candidates() const { return candidates_.size(); }
  const char* candidate(size_t i) const { return candidates_[i].c_str(); }
  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return envp_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<std::string> env_strings_;
  std::vector<char*> argv_, envp_;
  std::vector<std::string> candidates_;
};

}  // namespace hetpool::agent
