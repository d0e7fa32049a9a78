#include "src/common/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace hetpool {
namespace {

absl::Status Failed(const std::string& what, const std::string& path, int error) {
  return absl::InternalError(absl::StrCat("cannot write ", path, ": ", what, ": ", std::strerror(error)));
}

}  // namespace

absl::Status ReplaceFileDurably(const std::string& path, absl::string_view contents, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Failed("open " + tmp, path, errno);
  // write(2) may take less than asked (a signal, a filesystem near full): go on from there, and
  // take an error or a write of nothing as the end.
  size_t done = 0;
  int error = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  std::string step = "write";
  // Delayed allocation can report a full disk only at fsync, and some filesystems at close.
  if (error == 0 && fsync(fd) != 0) error = errno, step = "fsync";
  if (close(fd) != 0 && error == 0) error = errno, step = "close";
  if (error == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) error = errno, step = "rename";
  if (error != 0) {
    unlink(tmp.c_str());
    return Failed(step, path, error);
  }
  // The rename is durable only once the directory is: without this a crash may bring back the
  // old file (or none), which for a ledger means processes nobody stops.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    const int synced = fsync(dfd);
    const int sync_error = errno;
    close(dfd);
    if (synced != 0) return Failed("fsync of its directory", path, sync_error);
  }
  return absl::OkStatus();
}

}  // namespace hetpool
