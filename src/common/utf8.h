// Text from a job (its output, an agent's words about it) goes into protobuf `string` fields,
// which must hold valid UTF-8: a peer refuses to parse a message that does not, so one stray
// byte, or a line cut in the middle of a character, would lose the whole report.
#pragma once

#include <cstddef>
#include <limits>
#include <string>

#include "absl/strings/string_view.h"

namespace hetpool {

// The length of the valid UTF-8 sequence `text` starts with, or 0 when it starts with a byte that
// begins none (or is empty).
size_t Utf8SequenceLength(absl::string_view text);

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF (what proto3 enforces).
bool IsValidUtf8(absl::string_view text);

// `text` with each byte that does not start a valid UTF-8 sequence replaced by U+FFFD, cut at a
// character boundary to at most `max_bytes`.
std::string ValidUtf8(absl::string_view text, size_t max_bytes = std::numeric_limits<size_t>::max());

}  // namespace hetpool
