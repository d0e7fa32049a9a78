// hetpoolctl's output: aligned tables for people, protobuf JSON (field names as in job files) for
// scripts.
#pragma once

#include <string>
#include <vector>

#include "google/protobuf/message.h"

namespace hetpool::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string ToJson(const google::protobuf::Message& message);
// One compact JSON object and a newline: a line of a JSON Lines stream.
std::string ToJsonLine(const google::protobuf::Message& message);
std::string Age(int64_t unix_seconds);  // "3m ago"

}  // namespace hetpool::cli
