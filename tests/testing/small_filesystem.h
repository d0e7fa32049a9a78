// A small tmpfs for tests of what a full disk does (ENOSPC for real, not a mock): mounted over
// `dir` by a test running as root, detached when the test ends. Fill() writes a file until the
// filesystem refuses; Free() removes it. Mount() fails (the test skips) where mounting is not
// allowed.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace hetpool::testing {

class SmallFilesystem {
 public:
  static absl::StatusOr<std::unique_ptr<SmallFilesystem>> Mount(const std::string& dir, size_t bytes) {
    if (geteuid() != 0) return absl::FailedPreconditionError("mounting a tmpfs needs root");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string options = absl::StrCat("size=", bytes, ",mode=0755");
    if (mount("hetpool-test", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("mount tmpfs on ", dir, ": ", std::strerror(errno)));
    }
    return std::unique_ptr<SmallFilesystem>(new SmallFilesystem(dir));
  }
  ~SmallFilesystem() { umount2(dir_.c_str(), MNT_DETACH); }
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;

  // Writes dir/fill until a write fails with ENOSPC; any other error is returned.
  absl::Status Fill() {
    const int fd = open(fill_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return absl::InternalError(absl::StrCat(fill_path(), ": ", std::strerror(errno)));
    const std::string block(64 * 1024, 'x');
    int error = 0;
    while (true) {
      if (write(fd, block.data(), block.size()) < 0) {
        error = errno;
        break;
      }
    }
    close(fd);
    if (error != ENOSPC) return absl::InternalError(absl::StrCat("filling ", dir_, ": ", std::strerror(error)));
    return absl::OkStatus();
  }
  void Free() { unlink(fill_path().c_str()); }
  bool Full() const {
    struct statvfs fs;
    return statvfs(dir_.c_str(), &fs) == 0 && fs.f_bfree == 0;
  }
  const std::string& dir() const { return dir_; }

 private:
  explicit SmallFilesystem(std::string dir) : dir_(std::move(dir)) {}
  std::string fill_path() const { return dir_ + "/fill"; }
  std::string dir_;
};

}  // namespace hetpool::testing
