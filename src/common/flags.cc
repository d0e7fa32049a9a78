#include "src/common/flags.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hetpool {

void FlagSet::Add(const std::string& name, std::string help, bool is_bool,
                  std::function<absl::Status(const std::string&)> set) {
  flags_[name] = Flag{std::move(help), is_bool, std::move(set)};
}

void FlagSet::String(const std::string& name, std::string* target, const std::string& help) {
  Add(name, help, false, [target](const std::string& v) {
    *target = v;
    return absl::OkStatus();
  });
}

void FlagSet::Int(const std::string& name, int* target, const std::string& help) {
  Add(name, help, false, [target, name](const std::string& v) {
    if (!absl::SimpleAtoi(v, target)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", v, "' is not an integer"));
    }
    return absl::OkStatus();
  });
}

void FlagSet::Double(const std::string& name, double* target, const std::string& help) {
  Add(name, help, false, [target, name](const std::string& v) {
    if (!absl::SimpleAtod(v, target)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", v, "' is not a number"));
    }
    return absl::OkStatus();
  });
}

void FlagSet::Bool(const std::string& name, bool* target, const std::string& help) {
  Add(name, help, true, [target, name](const std::string& v) {
    if (!absl::SimpleAtob(v, target)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", v, "' is not true/false"));
    }
    return absl::OkStatus();
  });
}

void FlagSet::Duration(const std::string& name, absl::Duration* target, const std::string& help) {
  Add(name, help, false, [target, name](const std::string& v) {
    auto d = ParseDurationFlag(v);
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", d.status().message()));
    *target = *d;
    return absl::OkStatus();
  });
}

void FlagSet::List(const std::string& name, std::vector<std::string>* target, const std::string& help) {
  // The first use on the command line replaces the default; later uses append.
  auto replaced = std::make_shared<bool>(false);
  Add(name, help, false, [target, replaced](const std::string& v) {
    if (!*replaced) target->clear();
    *replaced = true;
    for (auto part : absl::StrSplit(v, ',', absl::SkipEmpty())) target->emplace_back(part);
    return absl::OkStatus();
  });
}

void FlagSet::Values(const std::string& name, std::vector<std::string> words) {
  auto it = flags_.find(name);
  if (it == flags_.end()) return;
  it->second.completion = ValueCompletion::kWords;
  it->second.words = std::move(words);
}

void FlagSet::CompleteAs(const std::string& name, ValueCompletion completion) {
  if (auto it = flags_.find(name); it != flags_.end()) it->second.completion = completion;
}

std::vector<FlagDescription> FlagSet::Describe() const {
  std::vector<FlagDescription> out;
  for (const auto& [name, flag] : flags_) {
    FlagDescription d{name, {}, !flag.is_bool, flag.completion, flag.words};
    for (const auto& [short_name, target] : aliases_) {
      if (target == name) d.aliases.push_back(short_name);
    }
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(const std::vector<std::string>& args) {
  return ParseArgs(args, /*stop_at_positional=*/false);
}

absl::StatusOr<std::vector<std::string>> FlagSet::ParseLeading(const std::vector<std::string>& args) {
  return ParseArgs(args, /*stop_at_positional=*/true);
}

absl::StatusOr<std::vector<std::string>> FlagSet::ParseArgs(const std::vector<std::string>& args,
                                                            bool stop_at_positional) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto alias = aliases_.find(args[i]);
    const std::string arg = alias == aliases_.end() ? args[i] : "--" + alias->second;
    if (arg == "--") {
      positional.insert(positional.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg == "-h" || arg == "--help") return absl::CancelledError(Usage());
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      if (stop_at_positional) {
        positional.insert(positional.end(), args.begin() + static_cast<long>(i), args.end());
        break;
      }
      positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (it->second.is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    if (auto s = it->second.set(value); !s.ok()) return s;
    set_.insert(name);
  }
  return positional;
}

absl::Status FlagSet::ApplyConfig(const nlohmann::json& config) {
  if (!config.is_object()) return absl::InvalidArgumentError("config: must be a JSON object");
  for (const auto& [key, value] : config.items()) {
    std::string name = key;
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    auto it = flags_.find(name);
    if (it == flags_.end() || name == "config") {
      return absl::InvalidArgumentError(absl::StrCat("config: unknown key '", key, "'"));
    }
    if (set_.contains(name)) continue;
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_boolean() || value.is_number()) {
      text = value.dump();
    } else if (value.is_array()) {
      for (const auto& item : value) {
        if (!item.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat("config: '", key, "' must be strings"));
        }
        if (!text.empty()) text += ",";
        text += item.get<std::string>();
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("config: '", key, "' has an unsupported type"));
    }
    if (auto s = it->second.set(text); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config: ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::string FlagSet::Usage() const {
  std::string out = usage_ + "\n";
  if (!flags_.empty()) absl::StrAppend(&out, "\nFlags:\n", FlagHelp());
  return out;
}

std::string FlagSet::FlagHelp() const {
  std::string out;
  for (const auto& [name, flag] : flags_) {
    std::string spellings = "--" + name;
    for (const auto& [short_name, target] : aliases_) {
      if (target == name) spellings = short_name + ", " + spellings;
    }
    absl::StrAppend(&out, "  ", spellings, flag.is_bool ? "" : " VALUE", "\n      ", flag.help);
    if (!flag.words.empty()) absl::StrAppend(&out, "; values: ", absl::StrJoin(flag.words, ", "));
    out += "\n";
  }
  return out;
}

namespace {

// " (as user NAME, uid N)": who was refused.
std::string AsWhom() {
  const uid_t uid = geteuid();
  const struct passwd* account = getpwuid(uid);
  return absl::StrCat(" (as user ", account != nullptr ? account->pw_name : "?", ", uid ", uid, ")");
}

absl::StatusOr<std::string> ReadOpenFile(const std::string& path, int fd) {
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return absl::NotFoundError(absl::StrCat(path, ": cannot be read: ", std::strerror(error)));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

absl::StatusOr<int> OpenForReading(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int error = errno;
  return absl::NotFoundError(absl::StrCat(path, ": cannot be read: ", std::strerror(error),
                                          error == EACCES || error == EPERM ? AsWhom() : ""));
}

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  auto fd = OpenForReading(path);
  if (!fd.ok()) return fd.status();
  return ReadOpenFile(path, *fd);
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  auto fd = OpenForReading(path);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (::fstat(*fd, &st) == 0 && (st.st_mode & 077) != 0) {
    ::close(*fd);
    return absl::PermissionDeniedError(
        absl::StrFormat("%s holds a secret but its group or others may read it (mode %04o): chmod 600 %s", path,
                        st.st_mode & 07777, path));
  }
  return ReadOpenFile(path, *fd);
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  return json;
}

absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text) {
  absl::Duration d;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds)) return absl::Seconds(seconds);
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a duration (examples: 300s, 5m, 250ms)"));
  }
  return d;
}

}  // namespace hetpool
