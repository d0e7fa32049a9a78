#include "src/common/watched_file.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "src/common/flags.h"

namespace hetpool {
namespace {

absl::StatusOr<absl::Time> ModifiedAt(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  return absl::FromTimeT(st.st_mtim.tv_sec) + absl::Nanoseconds(st.st_mtim.tv_nsec);
}

}  // namespace

absl::StatusOr<WatchedFile> WatchedFile::Open(std::string path, absl::Duration recheck) {
  WatchedFile file(std::move(path), recheck);
  auto modified = ModifiedAt(file.path_);
  if (!modified.ok()) return modified.status();
  auto text = ReadTextFile(file.path_);
  if (!text.ok()) return text.status();
  file.modified_at_ = *modified;
  file.text_ = *std::move(text);
  return file;
}

std::optional<std::string> WatchedFile::Changed(absl::Time now) {
  if (now - checked_at_ < recheck_) return std::nullopt;
  checked_at_ = now;
  auto modified = ModifiedAt(path_);
  if (!modified.ok() || *modified == modified_at_) return std::nullopt;
  auto text = ReadTextFile(path_);
  if (!text.ok()) return std::nullopt;
  modified_at_ = *modified;
  text_ = *std::move(text);
  return text_;
}

}  // namespace hetpool
