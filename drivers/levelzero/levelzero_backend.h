// Intel GPUs through Level Zero Sysman (libze_loader.so.1), loaded at run time.
#pragma once

#include <memory>

#include "drivers/device_backend.h"
#include "drivers/dl/dynamic_library.h"
#include "drivers/levelzero/levelzero_abi.h"

namespace hetpool::drivers {

class LevelZeroBackend : public DeviceBackend {
 public:
  static absl::StatusOr<std::unique_ptr<LevelZeroBackend>> Load(const std::vector<std::string>& candidates);

  absl::string_view Name() const override { return "levelzero"; }
  bool Simulated() const override { return false; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override;

 private:
  struct EntryPoints {
    HETPOOL_L0_REQUIRED(HETPOOL_ENTRY_POINT_MEMBER)
    HETPOOL_L0_OPTIONAL(HETPOOL_ENTRY_POINT_MEMBER)
  };
  LevelZeroBackend(std::unique_ptr<DynamicLibrary> lib, EntryPoints t) : lib_(std::move(lib)), ze_(t) {}
  absl::StatusOr<std::vector<zes_device_handle_t>> Devices();
  // The processes holding the card (zesDeviceProcessesGetState); empty when Sysman cannot tell.
  std::vector<CardProcess> Processes(zes_device_handle_t handle) const;
  // The reset Sysman asks for, its memory's health (the worst of its modules, read with their
  // sizes), uncorrectable RAS errors and the PCIe link against `max_speed`, as signals.
  void AddHealthSignals(zes_device_handle_t handle, zes_mem_health_t memory, const zes_pci_speed_t& max_speed,
                        DeviceRecord& d) const;

  std::unique_ptr<DynamicLibrary> lib_;
  EntryPoints ze_;
};

}  // namespace hetpool::drivers
