// hetpoolctl's standard output and error as a terminal receives them: every control character
// but newline and tab in what is printed is shown escaped (src/common/terminal_text.h), so a
// job's output, failure lines and reasons, names, labels and events cannot drive the reader's
// terminal (OSC 52 clipboard writes, screen clears, title changes). Installed for every command
// but those printing JSON (which escapes control characters itself and must stay exact); `logs
// --raw` writes to RawStdout(), the stream as it was.
#pragma once

#include <memory>
#include <ostream>
#include <streambuf>

namespace hetpool::cli {

class EscapedTerminalOutput {
 public:
  EscapedTerminalOutput();   // std::cout and std::cerr go through the escaping from now on
  ~EscapedTerminalOutput();  // flushes, and gives them their own buffers back
  EscapedTerminalOutput(const EscapedTerminalOutput&) = delete;
  EscapedTerminalOutput& operator=(const EscapedTerminalOutput&) = delete;

 private:
  class Escaping;
  std::unique_ptr<Escaping> out_, err_;
  std::streambuf* own_out_;
  std::streambuf* own_err_;
};

// Standard output without the escaping (std::cout itself when none is installed).
std::ostream& RawStdout();

}  // namespace hetpool::cli
