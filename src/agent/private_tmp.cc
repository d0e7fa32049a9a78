#include "src/agent/private_tmp.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hetpool::agent {
namespace fs = std::filesystem;

namespace {
// MPS clients find their control daemon here unless CUDA_MPS_PIPE_DIRECTORY says otherwise.
constexpr const char* kMpsPipeDirectory = "/tmp/nvidia-mps";
}  // namespace

bool UnderTmp(const std::string& path) { return path == "/tmp" || absl::StartsWith(path, "/tmp/"); }

PrivateTmp::PrivateTmp(const std::vector<std::string>& keep, bool private_shm, uint64_t shm_mib) {
  std::error_code shm_ec;
  private_shm_ = private_shm && fs::is_directory("/dev/shm", shm_ec);
  const std::string shm = shm_mib > 0 ? absl::StrCat("mode=1777,size=", shm_mib, "m") : "mode=1777";
  shm.copy(shm_options_, sizeof(shm_options_) - 1);
  std::set<std::string> wanted;
  std::vector<std::string> candidates = keep;
  candidates.push_back(kMpsPipeDirectory);
  for (const std::string& path : candidates) {
    std::error_code ec;
    const std::string real = fs::weakly_canonical(path, ec).string();
    if (ec || !UnderTmp(real) || real == "/tmp" || !fs::is_directory(real, ec)) continue;
    wanted.insert(real);
  }
  // A path inside another kept one comes with it (sorted: an outer path comes first).
  for (const std::string& path : wanted) {
    const bool inside = std::any_of(kept_.begin(), kept_.end(),
                                    [&](const std::string& outer) { return absl::StartsWith(path, outer + "/"); });
    if (!inside) kept_.push_back(path);
  }
  std::set<std::string> dirs;  // sorted: every parent before its children
  for (const std::string& path : kept_) {
    binds_.push_back(Bind{path});
    for (fs::path dir = path; dir.string() != "/tmp" && dir.has_parent_path(); dir = dir.parent_path()) {
      dirs.insert(dir.string());
    }
  }
  dirs_to_make_.assign(dirs.begin(), dirs.end());
}

namespace {
// "/proc/self/fd/<fd>" into `out` (room for it made by the caller): no allocation, no locale.
void FdPath(int fd, char* out) {
  static constexpr char kPrefix[] = "/proc/self/fd/";
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + fd % 10);
    fd /= 10;
  } while (fd > 0);
  size_t at = 0;
  for (const char* c = kPrefix; *c != '\0'; ++c) out[at++] = *c;
  while (n > 0) out[at++] = digits[--n];
  out[at] = '\0';
}
}  // namespace

int PrivateTmp::EnterInChild() {
  // Only system calls from here: this runs between fork and exec.
  if (unshare(CLONE_NEWNS) != 0) return errno;
  // Slave: the host's later mounts (a network filesystem coming back) still show here; ours
  // never reach the host.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return errno;
  // What is kept is opened now, in this namespace (a bind's source must be in the caller's) and
  // before the tmpfs hides it.
  for (Bind& bind : binds_) {
    bind.fd = open(bind.target.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (bind.fd < 0) return errno;
    FdPath(bind.fd, bind.source);
  }
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) return errno;
  for (const std::string& dir : dirs_to_make_) {
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  }
  for (const Bind& bind : binds_) {
    if (mount(bind.source, bind.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return errno;
    close(bind.fd);
  }
  if (private_shm_ && mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, shm_options_) != 0) return errno;
  return 0;
}

}  // namespace hetpool::agent
