#include "src/cli/terminal_output.h"

#include <cstring>
#include <iostream>
#include <string>

#include "absl/strings/string_view.h"
#include "src/common/terminal_text.h"

namespace hetpool::cli {
namespace {

std::streambuf* g_raw_stdout = nullptr;  // set while an EscapedTerminalOutput is installed

// How many bytes at the end of `text` are the start of a UTF-8 character still to come: kept
// back at a flush, so that a character split between two writes is not shown as bytes.
size_t IncompleteTail(const std::string& text) {
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const unsigned char b = static_cast<unsigned char>(text[text.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

}  // namespace

// Holds what is written until a newline or a flush, then passes it on escaped. Lines are whole
// when escaped, so an escape sequence written in two pieces is caught all the same.
class EscapedTerminalOutput::Escaping : public std::streambuf {
 public:
  explicit Escaping(std::streambuf* sink) : sink_(sink) {}
  ~Escaping() override { Drain(/*everything=*/true); }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    pending_ += traits_type::to_char_type(c);
    if (c == '\n') Drain(false);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    pending_.append(s, static_cast<size_t>(n));
    if (std::memchr(s, '\n', static_cast<size_t>(n)) != nullptr) Drain(false);
    return n;
  }
  int sync() override {
    Drain(false);
    const size_t keep = IncompleteTail(pending_);
    Pass(pending_.size() - keep);
    return sink_->pubsync();
  }

 private:
  // Passes on the complete lines (everything, when asked).
  void Drain(bool everything) {
    if (everything) {
      Pass(pending_.size());
      sink_->pubsync();
      return;
    }
    const size_t newline = pending_.rfind('\n');
    if (newline != std::string::npos) Pass(newline + 1);
  }
  void Pass(size_t bytes) {
    if (bytes == 0) return;
    const std::string shown = EscapeControls(absl::string_view(pending_).substr(0, bytes));
    sink_->sputn(shown.data(), static_cast<std::streamsize>(shown.size()));
    pending_.erase(0, bytes);
  }

  std::streambuf* sink_;
  std::string pending_;
};

EscapedTerminalOutput::EscapedTerminalOutput()
    : out_(std::make_unique<Escaping>(std::cout.rdbuf())),
      err_(std::make_unique<Escaping>(std::cerr.rdbuf())),
      own_out_(std::cout.rdbuf()),
      own_err_(std::cerr.rdbuf()) {
  std::cout.flush();
  std::cerr.flush();
  g_raw_stdout = own_out_;
  std::cout.rdbuf(out_.get());
  std::cerr.rdbuf(err_.get());
}

EscapedTerminalOutput::~EscapedTerminalOutput() {
  std::cout.flush();
  std::cerr.flush();
  std::cout.rdbuf(own_out_);
  std::cerr.rdbuf(own_err_);
  g_raw_stdout = nullptr;
  out_.reset();  // passes on what is still held
  err_.reset();
}

std::ostream& RawStdout() {
  if (g_raw_stdout == nullptr) return std::cout;
  static std::ostream raw(nullptr);
  raw.rdbuf(g_raw_stdout);
  return raw;
}

}  // namespace hetpool::cli
