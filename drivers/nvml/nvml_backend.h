// NVIDIA devices through NVML (libnvidia-ml.so.1), loaded at run time.
#pragma once

#include <memory>

#include "drivers/device_backend.h"
#include "drivers/dl/dynamic_library.h"
#include "drivers/nvml/nvml_abi.h"

namespace hetpool::drivers {

class NvmlBackend : public DeviceBackend {
 public:
  // NOT_FOUND: library absent; FAILED_PRECONDITION: a required symbol is missing; other errors:
  // nvmlInit_v2 failed (with NVML's error string).
  static absl::StatusOr<std::unique_ptr<NvmlBackend>> Load(const std::vector<std::string>& candidates);
  ~NvmlBackend() override;

  absl::string_view Name() const override { return "nvml"; }
  bool Simulated() const override { return false; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override;
  // Per card only its UUID and nvmlDeviceGetComputeRunningProcesses_v3.
  absl::StatusOr<std::vector<DeviceRecord>> CardProcesses() override;

 private:
  struct EntryPoints {
    HETPOOL_NVML_REQUIRED(HETPOOL_ENTRY_POINT_MEMBER)
    HETPOOL_NVML_OPTIONAL(HETPOOL_ENTRY_POINT_MEMBER)
  };
  NvmlBackend(std::unique_ptr<DynamicLibrary> lib, EntryPoints t) : lib_(std::move(lib)), nvml_(t) {}
  std::string Error(nvmlReturn_t rc) const;
  // The processes holding the card (nvmlDeviceGetComputeRunningProcesses_v3); empty when NVML
  // cannot tell.
  std::vector<CardProcess> ComputeProcesses(nvmlDevice_t handle) const;

  std::unique_ptr<DynamicLibrary> lib_;
  EntryPoints nvml_;
};

}  // namespace hetpool::drivers
