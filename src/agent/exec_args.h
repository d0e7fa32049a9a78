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
  }
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;

  const char* path() const { return argv_[0]; }
  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return envp_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<std::string> env_strings_;
  std::vector<char*> argv_, envp_;
};

}  // namespace hetpool::agent
