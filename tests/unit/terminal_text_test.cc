// What reaches a terminal from text a job, user or node controls (issue 45, item 5).
#include "src/common/terminal_text.h"

#include <iostream>
#include <sstream>

#include "gtest/gtest.h"
#include "src/cli/terminal_output.h"

namespace hetpool {
namespace {

TEST(EscapeControls, ShowsEveryControlCharacterButNewlineAndTab) {
  const struct {
    std::string in, shown;
  } cases[] = {
      {"plain text, UTF-8 too: 損失 ✓\n\tindented\n", "plain text, UTF-8 too: 損失 ✓\n\tindented\n"},
      {"\033]52;c;aGVsbG8=\007", "\\x1b]52;c;aGVsbG8=\\x07"},  // OSC 52: writes the clipboard
      {"\033[2J\033[H", "\\x1b[2J\\x1b[H"},                    // clears the screen
      {"\033]0;TITLE\007", "\\x1b]0;TITLE\\x07"},              // sets the window title
      {"50%\r100%", "50%\\r100%"},
      {std::string("nul\0here", 8), "nul\\x00here"},
      {"del\x7f", "del\\x7f"},
      {"c1 csi \xc2\x9b"
       "2J",
       "c1 csi \\u009b2J"},                   // U+009B: CSI to an 8-bit terminal
      {"bare \x9b byte", "bare \\x9b byte"},  // not UTF-8: shown as the byte
      {"cut \xe6\x90", "cut \\xe6\\x90"},
      {"\xc2\xa0nbsp", "\xc2\xa0nbsp"},  // U+00A0 prints
  };
  for (const auto& c : cases) {
    EXPECT_EQ(EscapeControls(c.in), c.shown);
  }
}

// hetpoolctl's streams: a sequence split over two writes and a flush is caught all the same,
// and a UTF-8 character split by a flush is not turned into bytes.
TEST(EscapedTerminalOutput, EscapesWhatPassesThroughStdoutAndStderr) {
  std::ostringstream out, err;
  std::streambuf* real_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* real_err = std::cerr.rdbuf(err.rdbuf());
  {
    cli::EscapedTerminalOutput escaped;
    std::cout << "job said: \033]52;c;" << std::flush << "aGk=\007 done\n";
    std::cout << "\xe6" << std::flush << "\x90\x8d ok";
    std::cerr << "hetpoolctl: reason \033[2J\n";
    cli::RawStdout() << "";  // the raw stream exists beside it
  }
  std::cout.rdbuf(real_out);
  std::cerr.rdbuf(real_err);
  EXPECT_EQ(out.str(), "job said: \\x1b]52;c;aGk=\\x07 done\n\xe6\x90\x8d ok");
  EXPECT_EQ(err.str(), "hetpoolctl: reason \\x1b[2J\n");
}

}  // namespace
}  // namespace hetpool
