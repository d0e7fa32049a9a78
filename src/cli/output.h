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
  // Columns (by header) Render may leave out, first named first, to fit its width.
  void Droppable(std::vector<std::string> headers) { droppable_ = std::move(headers); }
  // Columns two spaces apart; with `max_width`, droppable columns go until the lines fit.
  std::string Render(size_t max_width = 0) const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::string> droppable_;
};

// `text` wrapped at `width` columns, continuation lines indented by `indent` spaces.
std::string Wrap(const std::string& text, size_t width, size_t indent);

std::string ToJson(const google::protobuf::Message& message);
// One compact JSON object and a newline: a line of a JSON Lines stream.
std::string ToJsonLine(const google::protobuf::Message& message);
std::string Age(int64_t unix_seconds);  // "3m ago"

}  // namespace hetpool::cli
