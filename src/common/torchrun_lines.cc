#include "src/common/torchrun_lines.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace hetpool {
namespace {

bool IsBanner(absl::string_view line) {
  return absl::StartsWith(line, "*****************") ||
         absl::StartsWith(line, "Setting OMP_NUM_THREADS environment variable");
}

constexpr absl::string_view kLevels[] = {"DEBUG:", "INFO:", "WARNING:", "ERROR:", "CRITICAL:"};

enum class Match { kNo, kSoFar, kYes };  // kSoFar: `text` ends before the form could be judged

// glog's prefix as PyTorch 2.x writes it: "E1204 17:52:38.786000 515 torch/": the level, month
// and day, the time with microseconds, the thread id, and the file torchrun logs from.
Match MatchGlog(absl::string_view t) {
  // '9': a digit; '+': more of the one before; ' ' after the time: one or more spaces.
  static constexpr absl::string_view kShape = "L9999 99:99:99.9";
  size_t i = 0;
  for (; i < kShape.size(); ++i) {
    if (i >= t.size()) return Match::kSoFar;
    const char want = kShape[i];
    const bool ok = want == 'L'   ? absl::string_view("DIWEF").find(t[i]) != absl::string_view::npos
                    : want == '9' ? absl::ascii_isdigit(t[i])
                                  : t[i] == want;
    if (!ok) return Match::kNo;
  }
  while (i < t.size() && absl::ascii_isdigit(t[i])) ++i;  // the rest of the fraction
  if (i >= t.size()) return Match::kSoFar;
  if (t[i] != ' ') return Match::kNo;
  while (i < t.size() && t[i] == ' ') ++i;
  const size_t thread = i;
  while (i < t.size() && absl::ascii_isdigit(t[i])) ++i;
  if (i >= t.size()) return Match::kSoFar;
  if (i == thread) return Match::kNo;
  const absl::string_view file = t.substr(i);
  constexpr absl::string_view kFile = " torch/";
  if (file.size() < kFile.size()) return absl::StartsWith(kFile, file) ? Match::kSoFar : Match::kNo;
  return absl::StartsWith(file, kFile) ? Match::kYes : Match::kNo;
}

// PyTorch 1.x's "ERROR:torch." and its other levels (called at every capital letter of a rank's
// output the log filter reads: no allocation).
Match MatchPythonLogging(absl::string_view t) {
  static constexpr absl::string_view kForms[] = {"DEBUG:torch.", "INFO:torch.", "WARNING:torch.", "ERROR:torch.",
                                                 "CRITICAL:torch."};
  Match best = Match::kNo;
  for (absl::string_view form : kForms) {
    if (absl::StartsWith(t, form)) return Match::kYes;
    if (t.size() < form.size() && absl::StartsWith(form, t)) best = Match::kSoFar;
  }
  return best;
}

Match MatchTorchrunLogLine(absl::string_view t) {
  const Match glog = MatchGlog(t);
  if (glog == Match::kYes) return glog;
  const Match python = MatchPythonLogging(t);
  return python == Match::kYes || python == Match::kSoFar ? python : glog;
}

bool StartsGlogLine(absl::string_view t) { return MatchGlog(t) == Match::kYes; }

char GlogLevel(absl::string_view line) { return StartsGlogLine(line) ? line[0] : '\0'; }

}  // namespace

bool StartsTorchrunLogLine(absl::string_view text) { return MatchTorchrunLogLine(text) == Match::kYes; }

size_t UnjudgedTorchrunStart(absl::string_view text) {
  // The longest prefix to wait for is glog's, about 40 bytes: look no further back.
  for (size_t i = text.size() > 48 ? text.size() - 48 : 0; i < text.size(); ++i) {
    if (MatchTorchrunLogLine(text.substr(i)) == Match::kSoFar) return i;
  }
  return absl::string_view::npos;
}

size_t FindTorchrunLogLine(absl::string_view text) {
  for (size_t i = 1; i < text.size(); ++i) {
    // Every form starts with a capital letter: D, I, W, E, F or C.
    if (absl::string_view("DIWEFC").find(text[i]) == absl::string_view::npos) continue;
    if (StartsTorchrunLogLine(text.substr(i))) return i;
  }
  return absl::string_view::npos;
}

std::optional<TorchrunRankTag> RankTagOf(absl::string_view line) {
  if (line.empty() || line[0] != '[') return std::nullopt;
  size_t i = 1;
  while (i < line.size() && (absl::ascii_isalpha(line[i]) || line[i] == '_')) ++i;
  const size_t digits = i;
  while (i < line.size() && absl::ascii_isdigit(line[i])) ++i;
  if (i == digits || i - digits > 6 || i + 1 >= line.size() || line[i] != ']' || line[i + 1] != ':')
    return std::nullopt;
  TorchrunRankTag tag;
  if (!absl::SimpleAtoi(line.substr(digits, i - digits), &tag.local_rank)) return std::nullopt;
  tag.length = i + 2;
  return tag;
}

bool IsTorchrunChatter(absl::string_view line) {
  const char glog = GlogLevel(line);
  if (glog == 'I' || glog == 'W') return true;  // 2.x prints its banner through glog too
  return absl::StartsWith(line, "INFO:torch.distributed") || absl::StartsWith(line, "WARNING:torch.distributed") ||
         IsBanner(line);
}

bool IsTorchrunOwn(absl::string_view line) {
  if (GlogLevel(line) != '\0') return true;
  for (absl::string_view level : kLevels) {
    if (absl::StartsWith(line, level) && absl::StrContains(line, "torch.")) return true;
  }
  return IsBanner(line);
}

}  // namespace hetpool
