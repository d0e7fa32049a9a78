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

// How a shell completes a flag's value (hetpoolctl's generated completion script reads it).
enum class ValueCompletion { kNone, kWords, kFile, kNodeName, kJobId };

// What a flag set says about one flag, for help and completion generators.
struct FlagDescription {
  std::string name;                  // without "--"
  std::vector<std::string> aliases;  // short spellings, "-f"
  bool takes_value = true;           // false for booleans
  ValueCompletion completion = ValueCompletion::kNone;
  std::vector<std::string> words;  // the values offered, for kWords
};

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
  // The values a flag defined above accepts, listed in its help and offered by completion (the
  // flag's own parser still decides what is valid).
  void Values(const std::string& name, std::vector<std::string> words);
  // How a shell completes the value of a flag defined above (a file, a node name).
  void CompleteAs(const std::string& name, ValueCompletion completion);

  // Parses args (without the program name). Returns the positional arguments. "--help" yields
  // a CANCELLED status whose message is the usage text.
  absl::StatusOr<std::vector<std::string>> Parse(const std::vector<std::string>& args);
  // Parses the flags in front of the first positional argument and returns the arguments from
  // there on, unparsed: a program's global flags before its command.
  absl::StatusOr<std::vector<std::string>> ParseLeading(const std::vector<std::string>& args);
  bool Has(const std::string& name) const { return flags_.contains(name); }
  std::vector<FlagDescription> Describe() const;  // by name
  // Applies a JSON object's keys (flag names, '-' or '_') that were not set on the command line.
  absl::Status ApplyConfig(const nlohmann::json& config);
  bool WasSet(const std::string& name) const { return set_.contains(name); }
  std::string Usage() const;     // the usage text, then "Flags:" and FlagHelp() (none: no "Flags:")
  std::string FlagHelp() const;  // each flag, its spellings and its help

 private:
  struct Flag {
    std::string help;
    bool is_bool = false;
    std::function<absl::Status(const std::string&)> set;
    ValueCompletion completion = ValueCompletion::kNone;
    std::vector<std::string> words;
  };
  absl::StatusOr<std::vector<std::string>> ParseArgs(const std::vector<std::string>& args, bool stop_at_positional);
  void Add(const std::string& name, std::string help, bool is_bool,
           std::function<absl::Status(const std::string&)> set);

  std::string usage_;
  std::map<std::string, Flag> flags_;
  std::map<std::string, std::string> aliases_;
  std::set<std::string> set_;
};

// Reads a whole file; the error names it, why it cannot be read (the errno's text) and, when
// that is a permission, the account this process runs as.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);
// The same, for a file holding a secret (a bearer token): PERMISSION_DENIED when its group or
// others may read or write it, naming its mode and the chmod that mends it.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// Reads a JSON config file into an object; errors name the file.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// Parses "300s", "5m", "1h30m", "250ms", and bare seconds ("30").
absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text);

}  // namespace hetpool
