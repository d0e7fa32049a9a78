// A small command-line parser shared by hetpoold, hetpool-agent and hetpoolctl: `--name value` or
// `--name=value`, typed targets, clear errors for unknown or malformed flags, and JSON config files
// whose keys are the flag names (flags given on the command line win over the file).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace hetpool {

class FlagSet {
 public:
  explicit FlagSet(std::string usage) : usage_(std::move(usage)) {}

  void String(const std::string& name, std::string* target, const std::string& help);
  void Int(const std::string& name, int* target, const std::string& help);
  void Double(const std::string& name, double* target, const std::string& help);  // also 2e9
  void Bool(const std::string& name, bool* target, const std::string& help);
  void Duration(const std::string& name, absl::Duration* target, const std::string& help);
  // Repeatable; each value may also be a comma-separated list.
  void List(const std::string& name, std::vector<std::string>* target, const std::string& help);
  // A short spelling ("-f") for a flag defined above.
  void Alias(const std::string& short_name, const std::string& name) { aliases_[short_name] = name; }

  // Parses args (without the program name). Returns the positional arguments. "--help" yields
  // a CANCELLED status whose message is the usage text.
  absl::StatusOr<std::vector<std::string>> Parse(const std::vector<std::string>& args);
  // Applies a JSON object's keys (flag names, '-' or '_') that were not set on the command line.
  absl::Status ApplyConfig(const nlohmann::json& config);
  bool WasSet(const std::string& name) const { return set_.contains(name); }
  std::string Usage() const;

 private:
  struct Flag {
    std::string help;
    bool is_bool = false;
    std::function<absl::Status(const std::string&)> set;
  };
  void Add(const std::string& name, std::string help, bool is_bool,
           std::function<absl::Status(const std::string&)> set);

  std::string usage_;
  std::map<std::string, Flag> flags_;
  std::map<std::string, std::string> aliases_;
  std::set<std::string> set_;
};

// Reads a whole file; the error names it.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// Reads a JSON config file into an object; errors name the file.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// Parses "300s", "5m", "1h30m", "250ms", and bare seconds ("30").
absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text);

}  // namespace hetpool
