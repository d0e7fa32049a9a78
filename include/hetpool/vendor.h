// Vendors hetpool knows, and the per-vendor facts needed to run a PyTorch job on their devices
// (sources: ../shared/docs/VENDORS.md, summarised in docs/vendors.md). Header-only: every layer
// (drivers, scheduler, daemon, agent) reads the same table.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include "absl/strings/string_view.h"

namespace hetpool {

enum class Vendor { kNvidia, kMetax, kCambricon, kIntel, kCpu };

// How a vendor's devices are exposed to a torch.distributed job.
struct VendorRuntime {
  Vendor vendor;
  absl::string_view name;                         // "nvidia": the spec and inventory spelling
  std::span<const absl::string_view> visibility;  // variables restricting the visible devices
  absl::string_view dist_backend;                 // torch.distributed backend
  absl::string_view torch_device;                 // torch device type
  // The launch adapter's steps (src/agent/adapter/sitecustomize.py) that let a script written for
  // cuda and nccl run here unchanged; "" when there is nothing to change.
  absl::string_view adapter;
};

namespace vendor_internal {
inline constexpr absl::string_view kNvidiaVis[] = {"CUDA_VISIBLE_DEVICES"};
// mcPytorch reads MACA_VISIBLE_DEVICES and falls back to CUDA_VISIBLE_DEVICES: set both so either
// lookup restricts the job to its cards.
inline constexpr absl::string_view kMetaxVis[] = {"MACA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"};
inline constexpr absl::string_view kCambriconVis[] = {"MLU_VISIBLE_DEVICES"};
inline constexpr absl::string_view kIntelVis[] = {"ZE_AFFINITY_MASK"};
// A CPU job hides CUDA devices so a stray torch.cuda call cannot grab a card it was not given.
inline constexpr absl::string_view kCpuVis[] = {"CUDA_VISIBLE_DEVICES"};

inline constexpr std::array<VendorRuntime, 5> kRuntimes = {{
    {Vendor::kNvidia, "nvidia", kNvidiaVis, "nccl", "cuda", ""},
    {Vendor::kMetax, "metax", kMetaxVis, "nccl", "cuda", ""},  // the nccl API, backed by MCCL
    // Cambricon's own migration maps cuda and nccl to mlu and cncl; Intel's PyTorch has none.
    {Vendor::kCambricon, "cambricon", kCambriconVis, "cncl", "mlu", "torch_mlu"},
    {Vendor::kIntel, "intel", kIntelVis, "xccl", "xpu", "ipex,map:xpu:auto"},
    {Vendor::kCpu, "cpu", kCpuVis, "gloo", "cpu", "map:cpu:gloo"},
}};
}  // namespace vendor_internal

inline const VendorRuntime& RuntimeOf(Vendor vendor) {
  return vendor_internal::kRuntimes[static_cast<std::size_t>(vendor)];
}

inline absl::string_view VendorName(Vendor vendor) { return RuntimeOf(vendor).name; }

inline std::optional<Vendor> ParseVendor(absl::string_view name) {
  for (const auto& runtime : vendor_internal::kRuntimes) {
    if (runtime.name == name) return runtime.vendor;
  }
  return std::nullopt;
}

// For error messages.
inline constexpr absl::string_view kKnownVendorList = "nvidia, metax, cambricon, intel, cpu";

}  // namespace hetpool
