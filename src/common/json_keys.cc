#include "src/common/json_keys.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace hetpool {
namespace {

// Reads the document as events and keeps, for each open object, the keys seen so far.
class DuplicateKeyFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override {
    scopes_.push_back({true, {}, PendingKey()});
    return true;
  }
  bool key(string_t& key) override {
    Scope& scope = scopes_.back();
    if (!scope.keys.insert(key).second) {
      std::vector<std::string> path;
      for (const Scope& s : scopes_) {
        if (!s.name.empty()) path.push_back(s.name);
      }
      path.push_back(key);
      duplicate_ = absl::StrJoin(path, ".");
      return false;  // stop at the first
    }
    pending_key_ = key;
    return true;
  }
  bool end_object() override { return End(); }
  bool start_array(std::size_t) override {
    scopes_.push_back({false, {}, PendingKey()});
    return true;
  }
  bool end_array() override { return End(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Scope {
    bool object;
    std::set<std::string> keys;
    std::string name;  // the key this object or array is the value of
  };
  std::string PendingKey() {
    std::string name;
    name.swap(pending_key_);
    return name;
  }
  bool Value() {
    pending_key_.clear();
    return true;
  }
  bool End() {
    scopes_.pop_back();
    pending_key_.clear();
    return true;
  }

  std::vector<Scope> scopes_;
  std::string pending_key_;
  std::string duplicate_;
};

}  // namespace

absl::Status CheckNoDuplicateKeys(absl::string_view json) {
  DuplicateKeyFinder finder;
  nlohmann::json::sax_parse(json.begin(), json.end(), &finder, nlohmann::json::input_format_t::json,
                            /*strict=*/false);
  if (finder.duplicate().empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(finder.duplicate(), ": the key appears twice in one object"));
}

}  // namespace hetpool
