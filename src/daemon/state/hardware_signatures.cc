#include "src/daemon/state/hardware_signatures.h"

#include "absl/strings/match.h"

namespace hetpool::daemon {

const std::vector<HardwareSignature>& HardwareSignatures() {
  // Messages an application cannot cause. Left out on purpose: CUDA's "an illegal memory access
  // was encountered" and "device-side assert triggered" (Xid 13/31/43: the program's fault), and
  // "out of memory" (the job's size).
  static const std::vector<HardwareSignature> kTable = {
      {"uncorrectable NVLink error", "uncorrectable NVLink error", FaultScope::kCard,
       "CUDA runtime, cudaErrorNvlinkUncorrectable (220)"},
      {"GPU has fallen off the bus", "GPU fell off the bus", FaultScope::kCard,
       "NVIDIA driver, Xid 79 (also printed by NCCL and nvidia-smi)"},
      {"CUDA-capable device(s) is/are busy or unavailable", "card busy or unavailable", FaultScope::kCard,
       "CUDA runtime, cudaErrorDevicesUnavailable (46)"},
      {"uncorrectable ECC error", "uncorrectable ECC error", FaultScope::kCard,
       "CUDA runtime, cudaErrorECCUncorrectable (214): \"uncorrectable ECC error encountered\""},
      {"ZE_RESULT_ERROR_DEVICE_LOST", "device lost", FaultScope::kCard,
       "oneAPI Level Zero, ZE_RESULT_ERROR_DEVICE_LOST (hung, reset or removed)"},
      {"UR_RESULT_ERROR_DEVICE_LOST", "device lost", FaultScope::kCard,
       "oneAPI Unified Runtime under PyTorch's xpu device, UR_RESULT_ERROR_DEVICE_LOST"},
      {"unhandled system error", "NCCL system or network error", FaultScope::kNode,
       "NCCL, ncclSystemError (a system call or the network failed)"},
      {"remote process exited or there was a network error", "NCCL peer lost or network error", FaultScope::kPeers,
       "NCCL, ncclRemoteError"},
  };
  return kTable;
}

std::optional<HardwareEvidence> FindHardwareSignature(const std::vector<std::string>& lines) {
  // From the last line up: a Python traceback quotes the raising source line before the
  // exception's own line, which is the one that says what happened.
  for (const HardwareSignature& signature : HardwareSignatures()) {
    for (auto line = lines.rbegin(); line != lines.rend(); ++line) {
      if (absl::StrContains(*line, signature.text)) return HardwareEvidence{&signature, *line};
    }
  }
  return std::nullopt;
}

}  // namespace hetpool::daemon
