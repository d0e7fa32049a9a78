// Text that a job, a user or a node controls (output, failure lines, reasons, names, labels,
// events) on its way to a terminal. A terminal acts on control sequences in what it prints:
// OSC 52 writes the reader's clipboard, CSI sequences clear the screen or move the cursor, OSC 0
// sets the window title, and some terminals answer queries by typing into the reader's shell.
// So hetpoolctl shows them escaped, and only `logs --raw` (and JSON, which escapes them itself)
// passes the bytes as written.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace hetpool {

// `text` with every control character but newline and tab written out: C0 controls and DEL as
// \xHH (carriage return as \r), C1 controls (U+0080-U+009F, which 8-bit terminals take as ESC
// sequences) as \u00HH, and each byte that is not valid UTF-8 as \xHH. Printable text, UTF-8
// included, is unchanged.
std::string EscapeControls(absl::string_view text);

}  // namespace hetpool
