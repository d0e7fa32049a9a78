// NVIDIA devices through NVML (libnvidia-ml.so.1), loaded at run time.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  // Xid critical-error events, on a thread of its own (nvmlEventSetWait_v2); each is latched on
  // its card (by UUID) and reported with every discovery after.
  std::string WatchHealth(std::function<void()> changed) override;

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

  // The card's latched Xid signals and its counters' signals; a fatal one makes it unhealthy.
  // (NVLink recovery errors are read in Discover's walk over the links.)
  void AddHealthSignals(nvmlDevice_t handle, DeviceRecord& d);
  void WaitForEvents(nvmlEventSet_t set);

  std::unique_ptr<DynamicLibrary> lib_;
  EntryPoints nvml_;
  std::mutex health_mu_;
  std::map<std::string, std::vector<HealthSignal>> latched_;  // by UUID
  std::function<void()> health_changed_;
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

}  // namespace hetpool::drivers
