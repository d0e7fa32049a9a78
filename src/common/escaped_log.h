// The programs' own logs with what users, jobs and nodes wrote in them escaped: a cancel reason,
// a job name or a node's message reached hetpoold's log as written, so its escape sequences acted
// on the operator's terminal (`journalctl -f`, `tail -f`) and its newlines forged log lines
// (issue 60, item 9). Every message is escaped as the CLI escapes output (terminal_text.h), and a
// newline inside a message is written \n: one event, one line.
#pragma once

#include <string>

namespace hetpool {

// Sets spdlog's default logger (and every logger made after) to `pattern` (spdlog's), each
// message escaped.
void UseEscapedLogs(const std::string& pattern);

}  // namespace hetpool
