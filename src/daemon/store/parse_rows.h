// Decodes the rows a store read at start, on several threads: parsed into messages (nodes, the
// archive's jobs), or into the daemon's JobEntry (src/daemon/state/job_entry.h), which parses only
// the jobs that can still change. Each job carries its spec, launch plans and events, and protobuf
// parses their maps and strings one allocation at a time: at 83,000 live jobs parsing them all
// was most of a restart's time before the first answer.
#pragma once

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

// How many threads decode `rows` rows of `bytes` in all: one per core up to 8, and one for fewer
// than a few thousand small rows (a thread costs more than it saves there). Large rows count by
// their bytes: 5,000 nodes, each with its cards' capabilities and links, take longer to parse
// than 83,000 finished jobs take to decode.
inline size_t ParseThreads(size_t rows, size_t bytes) {
  constexpr size_t kRowsPerThread = 4096;
  constexpr size_t kBytesPerThread = 1 << 20;
  const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
  return std::clamp<size_t>(std::max(rows / kRowsPerThread, bytes / kBytesPerThread), 1, std::min<size_t>(cores, 8));
}

// Each row decoded by `decode(StoredRow&, Out&) -> absl::Status` (it may take the row's bytes),
// in the rows' order, on ParseThreads threads; the error is the first row's (in order) that fails.
template <typename Out, typename Decode>
absl::StatusOr<std::vector<Out>> DecodeRows(std::vector<StoredRow> rows, Decode decode) {
  std::vector<Out> out(rows.size());  // decoded in place: nothing is moved afterwards
  size_t bytes = 0;
  for (const StoredRow& row : rows) bytes += row.bytes.size();
  const size_t threads = ParseThreads(rows.size(), bytes);
  const size_t slice = (rows.size() + threads - 1) / threads;
  std::vector<std::pair<size_t, absl::Status>> first_bad(threads, {rows.size(), absl::OkStatus()});
  auto run = [&](size_t t) {
    const size_t end = std::min(rows.size(), (t + 1) * slice);
    for (size_t i = t * slice; i < end; ++i) {
      if (absl::Status s = decode(rows[i], out[i]); !s.ok()) {
        first_bad[t] = {i, std::move(s)};
        return;
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(run, t);
  run(0);
  for (std::thread& h : helpers) h.join();
  const auto bad = std::min_element(first_bad.begin(), first_bad.end(),
                                    [](const auto& a, const auto& b) { return a.first < b.first; });
  if (bad->first < rows.size()) return bad->second;
  return out;
}

// DATA_LOSS for a row that is not a `Message`, naming it as `what` ("job row", "etcd key").
template <typename Message>
absl::Status RowDoesNotParse(absl::string_view what, const StoredRow& row) {
  return absl::DataLossError(
      absl::StrCat(what, " '", row.key, "' does not parse as ", Message::descriptor()->full_name()));
}

// Every row parsed into `Message`, in the rows' order; DATA_LOSS naming `what` and the first
// row (in order) that does not parse.
template <typename Message>
absl::StatusOr<std::vector<Message>> ParseRows(std::vector<StoredRow> rows, absl::string_view what) {
  return DecodeRows<Message>(std::move(rows), [what](const StoredRow& row, Message& message) {
    return message.ParseFromString(row.bytes) ? absl::OkStatus() : RowDoesNotParse<Message>(what, row);
  });
}

}  // namespace hetpool::daemon
