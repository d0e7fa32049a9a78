// CanRun: whether a job's code and needs can run on a device, natively or through a translation
// layer, and why not. Rules (docs/fingerprints.md):
//  - CUDA cubins for sm_XY run on compute capability X.Z with Z >= Y; sm_XYa only on X.Y exactly.
//  - PTX for compute_XY JIT-compiles forward: any capability >= X.Y.
//  - MetaX runs CUDA code only from a MACA build, or via translation when the operator enables
//    the CUDA translation layer (cu-bridge); Cambricon and Intel never run CUDA code.
//  - BANG builds run on the listed mtp_XXX; SPIR-V/SYCL builds on Intel.
//  - Pure PyTorch code runs wherever the node has the torch plugin for the device.
//  - Precisions, memory per device and minimum driver/runtime versions must also be met.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "hetpool/device.h"

namespace hetpool::drivers {

struct CodeArtifacts {
  bool pytorch = false;                // plain PyTorch, no custom kernels
  std::vector<std::string> cuda_sass;  // "sm_80", "sm_90a"
  std::vector<std::string> cuda_ptx;   // "compute_80"
  bool maca = false;                   // built for MetaX MACA
  std::vector<std::string> bang;       // "mtp_372"
  bool spirv = false;                  // SYCL / SPIR-V build
  bool Empty() const { return !pytorch && cuda_sass.empty() && cuda_ptx.empty() && !maca && bang.empty() && !spirv; }
};

struct RunRequirements {
  CodeArtifacts code;  // empty = pure PyTorch
  std::set<Precision> precisions;
  uint64_t min_memory_mib = 0;
  std::string min_driver_version;
  std::string min_runtime_version;
};

// Facts about the node a device sits in.
struct RunContext {
  std::set<std::string> torch_devices;  // torch plugins installed: cuda, mlu, xpu, cpu
  bool metax_cuda_translation = false;  // operator enabled a CUDA translation layer on MetaX
  std::set<std::string> collectives;    // collective libraries across vendors installed: flagcx
};

enum class Compatibility { kNo = 0, kTranslated = 1, kNative = 2 };

struct CanRunResult {
  Compatibility compatibility = Compatibility::kNo;
  std::string reason;  // why not, or which artifact runs and how
};

CanRunResult CanRun(const RunRequirements& req, const DeviceRecord& device, const RunContext& node);

// Compares dotted version strings numerically ("535.104.05" < "550.54"); -1, 0 or 1.
int CompareVersions(const std::string& a, const std::string& b);

absl::string_view CompatibilityName(Compatibility c);

}  // namespace hetpool::drivers
