#include "src/daemon/logs/log_cursor.h"

#include "absl/strings/str_cat.h"
#include "src/common/convert.h"
#include "src/daemon/logs/log_request.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

constexpr size_t kLogChunk = 64 * 1024;
// What one pass reads at most: the chunks wait in memory until they are sent, and a stream
// holds up to --log-max-bytes (256 MiB) on each of a job's nodes.
constexpr size_t kPassBytes = 1 << 20;

// The marker a reader sees where the stream's size cap rotated bytes away.
std::string RotatedAway(uint64_t bytes) {
  return absl::StrCat("[hetpool: ", bytes, " earlier bytes of this log were rotated away (--log-max-bytes)]\n");
}

}  // namespace

absl::StatusOr<LogCursor::Pass> LogCursor::Next(const pb::Job& job) {
  Pass pass;
  const uint64_t generation = request_.generation() ? request_.generation() : job.generation();
  if (generation > job.generation()) {
    return absl::NotFoundError(absl::StrCat("job ", job.id(), " has no generation ", generation));
  }
  auto streams = LogStreamsFor(job, request_, generation);
  if (!streams.ok()) return streams.status();
  size_t read = 0;
  if (generation > 0) {
    for (const auto& [node, local_rank] : *streams) {
      std::optional<LogLabels> labels;
      if (!request_.raw()) labels = LogLabels{node, GlobalRanksOn(job, generation, node)};
      auto filter =
          filters_.try_emplace(node, local_rank, kMaxLogLine, labels, StartedDirectly(job, generation, node)).first;
      if (labels) filter->second.SetGlobalRanks(labels->global_ranks);  // known once the workers are up
      while (true) {
        if (read >= kPassBytes) {
          pass.more = true;  // the rest at the next pass, once these are sent
          return pass;
        }
        auto slice = logs_->Read(job.id(), generation, node, offsets_[node], kLogChunk);
        if (!slice.ok()) return slice.status();
        if (!slice->exists && NodeExited(job, generation, node)) {
          // The agent pushes every exited node's log (even an empty one) before its exit counts:
          // a missing one is gone, and saying so beats returning nothing.
          return absl::NotFoundError(absl::StrCat(
              "the log of ", job.id(), " generation ", generation, " on node ", node,
              " is not in this hetpoold's log store: it was written before a failover to a replica that does not "
              "share --logs-dir, or it was removed"));
        }
        if (slice->data.empty() && slice->dropped == 0) break;
        offsets_[node] += slice->dropped + slice->data.size();
        read += slice->data.size();
        pb::LogChunk chunk;
        chunk.set_node(node);
        if (slice->dropped > 0) chunk.set_data(RotatedAway(slice->dropped));
        chunk.mutable_data()->append(filter->second.Feed(slice->data));
        if (!chunk.data().empty()) pass.chunks.push_back(std::move(chunk));
      }
    }
  }
  const bool ended = IsTerminal(job.state()) || (request_.generation() && request_.generation() < job.generation());
  if (!request_.follow() || final_pass_) {
    Finish(pass);
  } else if (ended) {
    final_pass_ = true;
  }
  return pass;
}

void LogCursor::Finish(Pass& pass) {
  for (auto& [node, filter] : filters_) {
    pb::LogChunk chunk;
    chunk.set_node(node);
    chunk.set_data(filter.Finish());
    if (!chunk.data().empty()) pass.chunks.push_back(std::move(chunk));
  }
  pass.done = true;
}

}  // namespace hetpool::daemon
