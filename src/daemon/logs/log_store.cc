#include "src/daemon/logs/log_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/common/names.h"

namespace hetpool::daemon {
namespace {

constexpr size_t kMaxJobId = 128;
constexpr size_t kMaxNodeName = 63;
constexpr size_t kSegmentNameDigits = 20;

// Closes a descriptor on every path out of a function.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat("log store: ", what, ": ", std::strerror(errno)));
}

absl::Status CheckIds(const std::string& job_id, const std::string& node) {
  if (auto s = CheckPathComponent("job_id", job_id, kMaxJobId); !s.ok()) return s;
  return CheckPathComponent("node", node, kMaxNodeName);
}

// Opens `name` below `parent` as a directory, never through a link; creates it 0700 first when
// asked. -1 with errno set on failure.
int OpenDirAt(int parent, const std::string& name, bool create) {
  if (create && mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) return -1;
  return openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

struct Segment {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;
};

std::string SegmentName(uint64_t start) { return absl::StrFormat("%020u.log", start); }

// The stream's segments in offset order. Anything else in the directory (a link, a stray file)
// is not a segment and is never opened.
absl::StatusOr<std::vector<Segment>> ListSegments(int dir_fd) {
  const int copy = dup(dir_fd);  // closedir closes the descriptor it was given
  if (copy < 0) return Errno("dup");
  DIR* dir = fdopendir(copy);
  if (dir == nullptr) {
    close(copy);
    return Errno("fdopendir");
  }
  rewinddir(dir);
  std::vector<Segment> segments;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    uint64_t start = 0;
    if (name.size() != kSegmentNameDigits + 4 || name.substr(kSegmentNameDigits) != ".log" ||
        !absl::SimpleAtoi(name.substr(0, kSegmentNameDigits), &start)) {
      continue;
    }
    struct stat st {};
    if (fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    segments.push_back({start, static_cast<uint64_t>(st.st_size), std::string(name)});
  }
  closedir(dir);
  std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.start < b.start; });
  return segments;
}

uint64_t StreamEnd(const std::vector<Segment>& segments) {
  return segments.empty() ? 0 : segments.back().start + segments.back().size;
}

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LogStore>> LogStore::Open(const std::string& root, LogStoreOptions options) {
  if (options.max_stream_bytes < 4) return absl::InvalidArgumentError("log store: max_stream_bytes must be at least 4");
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) return absl::InternalError(absl::StrCat("log store: create ", root, ": ", ec.message()));
  const int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(absl::StrCat("open ", root));
  if (fchmod(fd, 0700) != 0) {
    const absl::Status s = Errno(absl::StrCat("chmod ", root));
    close(fd);
    return s;
  }
  return std::unique_ptr<LogStore>(new LogStore(fd, options));
}

LogStore::~LogStore() { close(root_fd_); }

absl::StatusOr<int> LogStore::StreamDir(const std::string& job_id, uint64_t generation, const std::string& node,
                                        bool create) const {
  if (auto s = CheckIds(job_id, node); !s.ok()) return s;
  auto failed = [&]() -> absl::StatusOr<int> {
    if (errno == ENOENT && !create) return -1;
    return Errno(absl::StrCat("open ", job_id, "/g", generation, "/", node));
  };
  Fd job_dir(OpenDirAt(root_fd_, job_id, create));
  if (job_dir.get() < 0) return failed();
  Fd generation_dir(OpenDirAt(job_dir.get(), absl::StrCat("g", generation), create));
  if (generation_dir.get() < 0) return failed();
  const int node_dir = OpenDirAt(generation_dir.get(), node, create);
  if (node_dir < 0) return failed();
  return node_dir;
}

absl::StatusOr<uint64_t> LogStore::Append(const std::string& job_id, uint64_t generation, const std::string& node,
                                          uint64_t offset, absl::string_view data) {
  absl::MutexLock lock(&mu_);
  auto dir_fd = StreamDir(job_id, generation, node, /*create=*/true);
  if (!dir_fd.ok()) return dir_fd.status();
  Fd dir(*dir_fd);
  auto segments = ListSegments(dir.get());
  if (!segments.ok()) return segments.status();
  uint64_t end = StreamEnd(*segments);
  if (offset > end || offset + data.size() <= end) return end;
  data.remove_prefix(end - offset);

  const uint64_t segment_bytes = std::max<uint64_t>(options_.max_stream_bytes / 4, 1);
  while (!data.empty()) {
    const bool start_new = segments->empty() || segments->back().size >= segment_bytes;
    if (start_new) segments->push_back({end, 0, SegmentName(end)});
    Segment& current = segments->back();
    const int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | (start_new ? O_CREAT | O_EXCL : 0);
    Fd file(openat(dir.get(), current.name.c_str(), flags, 0600));
    if (file.get() < 0) return Errno(absl::StrCat("open segment ", current.name));
    // Never zero: a full segment made start_new true above.
    const size_t take = static_cast<size_t>(std::min<uint64_t>(data.size(), segment_bytes - current.size));
    if (auto s = WriteAll(file.get(), data.substr(0, take)); !s.ok()) return s;
    current.size += take;
    end += take;
    data.remove_prefix(take);
  }
  // Keep the newest bytes within the cap; the segment being written always stays.
  uint64_t held = 0;
  for (const Segment& s : *segments) held += s.size;
  for (size_t i = 0; i + 1 < segments->size() && held > options_.max_stream_bytes; ++i) {
    if (unlinkat(dir.get(), (*segments)[i].name.c_str(), 0) != 0 && errno != ENOENT) {
      return Errno(absl::StrCat("remove segment ", (*segments)[i].name));
    }
    held -= (*segments)[i].size;
  }
  return end;
}

absl::StatusOr<LogSlice> LogStore::Read(const std::string& job_id, uint64_t generation, const std::string& node,
                                        uint64_t offset, size_t max_bytes) const {
  absl::MutexLock lock(&mu_);
  auto dir_fd = StreamDir(job_id, generation, node, /*create=*/false);
  if (!dir_fd.ok()) return dir_fd.status();
  LogSlice slice;
  if (*dir_fd < 0) return slice;
  slice.exists = true;
  Fd dir(*dir_fd);
  auto segments = ListSegments(dir.get());
  if (!segments.ok()) return segments.status();
  if (segments->empty()) return slice;
  if (offset < segments->front().start) {
    slice.dropped = segments->front().start - offset;
    offset = segments->front().start;
  }
  for (const Segment& segment : *segments) {
    if (offset >= segment.start + segment.size) continue;
    Fd file(openat(dir.get(), segment.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (file.get() < 0) return Errno(absl::StrCat("open segment ", segment.name));
    slice.data.resize(std::min<uint64_t>(max_bytes, segment.start + segment.size - offset));
    const ssize_t n =
        pread(file.get(), slice.data.data(), slice.data.size(), static_cast<off_t>(offset - segment.start));
    if (n < 0) return Errno(absl::StrCat("read segment ", segment.name));
    slice.data.resize(static_cast<size_t>(n));
    break;
  }
  return slice;
}

}  // namespace hetpool::daemon
