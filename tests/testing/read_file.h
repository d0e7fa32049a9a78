// A whole file as a string ("" when it cannot be read): what tests compare logs and state files by.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

namespace hetpool::testing {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace hetpool::testing
