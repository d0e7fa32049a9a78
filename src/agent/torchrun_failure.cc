#include "src/agent/torchrun_failure.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/torchrun_lines.h"
#include "src/common/utf8.h"

namespace hetpool::agent {
namespace {

std::string SignalName(int number) {
  const char* abbrev = sigabbrev_np(number);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(number);
}

// torchrun's exitcode: a worker's exit status, or minus the signal that ended it.
void SetExit(TorchrunFailure& out, int exitcode) {
  if (exitcode < 0) {
    out.signal = SignalName(-exitcode);
  } else {
    out.exit_code = exitcode;
  }
}

// The last lines `local_rank` printed in `before` (torchrun's own left out): its stdout lines
// ("[default1]:" stripped; its stderr too, where the launch adapter labels it) first, then the
// node's unlabelled lines (where a worker's stderr goes unadapted), so an error comes last.
std::vector<std::string> LastLinesOf(absl::string_view before, int local_rank) {
  std::vector<std::string> stdout_lines, stderr_lines;
  for (absl::string_view line : absl::StrSplit(before, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty() || IsTorchrunOwn(line)) continue;
    const auto tag = RankTagOf(line);
    if (tag && tag->local_rank != local_rank) continue;  // another local rank's output
    // A string field of the report: valid UTF-8, cut at a character (utf8.h).
    std::vector<std::string>* into = tag ? &stdout_lines : &stderr_lines;
    into->push_back(ValidUtf8(tag ? line.substr(tag->length) : line, kMaxLineBytes));
  }
  const size_t from_stderr = std::min(stderr_lines.size(), kMaxLastLines);
  const size_t from_stdout = std::min(stdout_lines.size(), kMaxLastLines - from_stderr);
  std::vector<std::string> last(stdout_lines.end() - static_cast<long>(from_stdout), stdout_lines.end());
  last.insert(last.end(), stderr_lines.end() - static_cast<long>(from_stderr), stderr_lines.end());
  return last;
}

}  // namespace

TorchrunFailure DirectFailure(absl::string_view log, int global_rank, int exit_code, int signal) {
  TorchrunFailure out;
  out.global_rank = global_rank;
  out.local_rank = 0;
  SetExit(out, signal > 0 ? -signal : exit_code);
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (!line.empty()) lines.push_back(line);
  }
  const size_t from = lines.size() - std::min(lines.size(), kMaxLastLines);
  for (size_t i = from; i < lines.size(); ++i) out.last_lines.push_back(ValidUtf8(lines[i], kMaxLineBytes));
  return out;
}

std::optional<TorchrunFailure> ParseFirstWorkerFailure(absl::string_view log, const std::vector<int>& global_ranks) {
  static const std::regex kFailed(R"(failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid)");
  size_t from = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const size_t at = from;
    from += line.size() + 1;
    if (!IsTorchrunOwn(line)) continue;
    std::cmatch m;
    const std::string text(line);
    if (!std::regex_search(text.c_str(), m, kFailed)) continue;
    TorchrunFailure out;
    int code = 0;
    absl::SimpleAtoi(m[1].str(), &code);
    absl::SimpleAtoi(m[2].str(), &out.local_rank);
    SetExit(out, code);
    if (out.local_rank < static_cast<int>(global_ranks.size())) {
      out.global_rank = global_ranks[static_cast<size_t>(out.local_rank)];
    }
    out.last_lines = LastLinesOf(log.substr(0, at), out.local_rank);
    return out;
  }
  return std::nullopt;
}

std::optional<TorchrunFailure> ParseTorchrunFailure(absl::string_view log) {
  const size_t root = log.rfind("Root Cause (first observed failure):");
  if (root == absl::string_view::npos) return std::nullopt;
  TorchrunFailure out;
  static const std::regex kRank(R"(^\s*rank\s*:\s*(-?\d+) \(local_rank: (-?\d+)\))");
  static const std::regex kExit(R"(^\s*exitcode\s*:\s*(-?\d+))");
  bool have_exit = false;
  for (absl::string_view line : absl::StrSplit(log.substr(root), '\n')) {
    std::cmatch m;
    const std::string text(line);
    if (std::regex_search(text.c_str(), m, kRank)) {
      absl::SimpleAtoi(m[1].str(), &out.global_rank);
      absl::SimpleAtoi(m[2].str(), &out.local_rank);
    } else if (!have_exit && std::regex_search(text.c_str(), m, kExit)) {
      int code = 0;
      absl::SimpleAtoi(m[1].str(), &code);
      have_exit = true;
      SetExit(out, code);
    }
    if (have_exit && out.local_rank >= 0) break;
  }
  if (!have_exit) return std::nullopt;

  // What the node printed before torchrun's report: the report starts at its failure log line
  // (1.x: "ERROR:torch...multiprocessing.api:failed (exitcode: 1) ...", 2.x: "E1204 17:52:44.488000
  // 549 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1) ...", after
  // which 2.x prints its ChildFailedError traceback and the banner) or, failing that, at the
  // Root Cause header.
  // A rank's last line written without a newline runs straight into torchrun's line: the
  // report then starts inside that line, and the rank's part is its own output.
  size_t end = absl::string_view::npos;
  for (size_t at = log.rfind("failed (exitcode:", root); at != absl::string_view::npos && at > 0;
       at = log.rfind("failed (exitcode:", at - 1)) {
    const size_t line_start = log.rfind('\n', at);
    const size_t from = line_start == absl::string_view::npos ? 0 : line_start + 1;
    const absl::string_view line = log.substr(from, log.find('\n', at) - from);
    const size_t torchrun = StartsTorchrunLogLine(line) ? 0 : FindTorchrunLogLine(line);
    if (torchrun != absl::string_view::npos && from + torchrun <= at) {
      end = from + torchrun;
      break;
    }
  }
  if (end == absl::string_view::npos) end = log.rfind('\n', root);  // no failure line: the Root Cause header
  const absl::string_view before = end == absl::string_view::npos ? absl::string_view() : log.substr(0, end);
  out.last_lines = LastLinesOf(before, out.local_rank);
  return out;
}

}  // namespace hetpool::agent
