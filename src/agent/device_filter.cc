#include "src/agent/device_filter.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hetpool::agent {
namespace {

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn insn{};
  insn.code = code;
  insn.dst_reg = dst & 0xf;
  insn.src_reg = src & 0xf;
  insn.off = off;
  insn.imm = imm;
  return insn;
}

// r1 points at struct bpf_cgroup_dev_ctx { u32 access_type (access << 16 | type); u32 major;
// u32 minor; }. r2 = type, r3 = major, r4 = minor; then, per denied device, "if all three match:
// return 0"; at the end "return 1".
std::vector<bpf_insn> DenyProgram(const std::vector<DeviceNumber>& denied) {
  constexpr uint8_t kLoadWord = BPF_LDX | BPF_MEM | BPF_W;
  constexpr uint8_t kAnd = BPF_ALU64 | BPF_AND | BPF_K;
  constexpr uint8_t kJumpIfNot = BPF_JMP | BPF_JNE | BPF_K;
  constexpr uint8_t kMove = BPF_ALU64 | BPF_MOV | BPF_K;
  constexpr uint8_t kExit = BPF_JMP | BPF_EXIT;
  std::vector<bpf_insn> p = {Insn(kLoadWord, 2, 1, 0, 0), Insn(kAnd, 2, 0, 0, 0xffff), Insn(kLoadWord, 3, 1, 4, 0),
                             Insn(kLoadWord, 4, 1, 8, 0)};
  for (const DeviceNumber& d : denied) {
    const int32_t type = d.type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
    // Each jump skips to the next device's first instruction.
    p.push_back(Insn(kJumpIfNot, 2, 0, 4, type));
    p.push_back(Insn(kJumpIfNot, 3, 0, 3, static_cast<int32_t>(d.major)));
    p.push_back(Insn(kJumpIfNot, 4, 0, 2, static_cast<int32_t>(d.minor)));
    p.push_back(Insn(kMove, 0, 0, 0, 0));
    p.push_back(Insn(kExit, 0, 0, 0, 0));
  }
  p.push_back(Insn(kMove, 0, 0, 0, 1));
  p.push_back(Insn(kExit, 0, 0, 0, 0));
  return p;
}

}  // namespace

absl::Status AttachDeviceDenyList(const std::string& cgroup_dir, const std::vector<DeviceNumber>& denied) {
  const std::vector<bpf_insn> program = DenyProgram(denied);
  static const char kLicense[] = "Apache-2.0";
  union bpf_attr load;
  std::memset(&load, 0, sizeof(load));
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(program.data());
  load.insn_cnt = static_cast<uint32_t>(program.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  const int prog = static_cast<int>(syscall(__NR_bpf, BPF_PROG_LOAD, &load, sizeof(load)));
  if (prog < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot load the device filter: ", std::strerror(errno)));
  }
  const int dir = open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    const int error = errno;
    close(prog);
    return absl::FailedPreconditionError(absl::StrCat("cannot open ", cgroup_dir, ": ", std::strerror(error)));
  }
  union bpf_attr attach;
  std::memset(&attach, 0, sizeof(attach));
  attach.target_fd = static_cast<uint32_t>(dir);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  const long attached = syscall(__NR_bpf, BPF_PROG_ATTACH, &attach, sizeof(attach));
  const int error = errno;
  close(dir);
  close(prog);  // the attachment holds the program for as long as the cgroup exists
  if (attached != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot attach the device filter to ", cgroup_dir, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace hetpool::agent
