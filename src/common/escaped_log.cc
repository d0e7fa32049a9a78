#include "src/common/escaped_log.h"

#include <memory>

#include "absl/strings/str_replace.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/spdlog.h"
#include "src/common/terminal_text.h"

namespace hetpool {
namespace {

class EscapingFormatter : public spdlog::formatter {
 public:
  explicit EscapingFormatter(std::string pattern)
      : pattern_(std::move(pattern)), inner_(std::make_unique<spdlog::pattern_formatter>(pattern_)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const absl::string_view payload(msg.payload.data(), msg.payload.size());
    if (!NeedsEscaping(payload)) {
      inner_->format(msg, dest);
      return;
    }
    const std::string escaped = absl::StrReplaceAll(EscapeControls(payload), {{"\n", "\\n"}, {"\t", "\\t"}});
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(escaped.data(), escaped.size());
    inner_->format(copy, dest);
  }

  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<EscapingFormatter>(pattern_); }

 private:
  // Most messages are plain: they are formatted without a copy.
  static bool NeedsEscaping(absl::string_view text) {
    for (unsigned char c : text) {
      if (c < 0x20 || c == 0x7f || c >= 0x80) return true;
    }
    return false;
  }

  std::string pattern_;
  std::unique_ptr<spdlog::pattern_formatter> inner_;
};

}  // namespace

void UseEscapedLogs(const std::string& pattern) { spdlog::set_formatter(std::make_unique<EscapingFormatter>(pattern)); }

}  // namespace hetpool
