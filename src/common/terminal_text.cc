#include "src/common/terminal_text.h"

#include "absl/strings/str_format.h"
#include "src/common/utf8.h"

namespace hetpool {
namespace {

// How many bytes at the start of `text` print as they are (0: the first needs escaping).
size_t Printable(absl::string_view text) {
  const unsigned char b = static_cast<unsigned char>(text[0]);
  if (b == '\n' || b == '\t') return 1;
  if (b < 0x20 || b == 0x7f) return 0;
  if (b < 0x80) return 1;
  const size_t length = Utf8SequenceLength(text);
  // U+0080-U+009F are encoded as C2 80 to C2 9F.
  if (length == 2 && b == 0xC2 && static_cast<unsigned char>(text[1]) <= 0x9F) return 0;
  return length;
}

}  // namespace

std::string EscapeControls(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t n = Printable(text);
    if (n > 0) {
      out.append(text.data(), n);
      text.remove_prefix(n);
      continue;
    }
    const unsigned char b = static_cast<unsigned char>(text[0]);
    if (b == '\r') {
      out += "\\r";
      text.remove_prefix(1);
    } else if (b == 0xC2 && Utf8SequenceLength(text) == 2) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(text[1]));
      text.remove_prefix(2);
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", b);
      text.remove_prefix(1);
    }
  }
  return out;
}

}  // namespace hetpool
