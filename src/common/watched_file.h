// A configuration file a daemon re-reads when it changes (tokens, queues): it looks at the
// file's modification time at most once per `recheck`, and hands back the new text only when
// that changed. What to do with text that does not parse is the caller's (keep the last good).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hetpool {

class WatchedFile {
 public:
  // Reads the file once; that first read must succeed.
  static absl::StatusOr<WatchedFile> Open(std::string path, absl::Duration recheck = absl::Seconds(1));

  const std::string& path() const { return path_; }
  const std::string& text() const { return text_; }  // as last read
  // The new text when the file changed since it was last read (checked at most once per
  // `recheck` of `now`); nullopt otherwise, or when it cannot be read now.
  std::optional<std::string> Changed(absl::Time now);

 private:
  WatchedFile(std::string path, absl::Duration recheck) : path_(std::move(path)), recheck_(recheck) {}

  std::string path_;
  absl::Duration recheck_;
  std::string text_;
  absl::Time modified_at_;
  absl::Time checked_at_ = absl::InfinitePast();
};

}  // namespace hetpool
