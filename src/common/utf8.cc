#include "src/common/utf8.h"

#include <algorithm>

namespace hetpool {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0.
size_t SequenceLength(absl::string_view s) {
  if (s.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

size_t Utf8SequenceLength(absl::string_view text) { return SequenceLength(text); }

bool IsValidUtf8(absl::string_view text) {
  while (!text.empty()) {
    const size_t length = SequenceLength(text);
    if (length == 0) return false;
    text.remove_prefix(length);
  }
  return true;
}

std::string ValidUtf8(absl::string_view text, size_t max_bytes) {
  static constexpr absl::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  while (!text.empty()) {
    const size_t length = SequenceLength(text);
    const absl::string_view piece = length > 0 ? text.substr(0, length) : kReplacement;
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece.data(), piece.size());
    text.remove_prefix(length > 0 ? length : 1);
  }
  return out;
}

}  // namespace hetpool
