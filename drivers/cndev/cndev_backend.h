// Cambricon MLUs through CNDev (libcndev.so), loaded at run time. Prefers the V2 calls and falls
// back to the pre-V2 names older Neuware releases export.
#pragma once

#include <memory>

#include "drivers/cndev/cndev_abi.h"
#include "drivers/device_backend.h"
#include "drivers/dl/dynamic_library.h"

namespace hetpool::drivers {

class CndevBackend : public DeviceBackend {
 public:
  static absl::StatusOr<std::unique_ptr<CndevBackend>> Load(const std::vector<std::string>& candidates);
  ~CndevBackend() override;

  absl::string_view Name() const override { return "cndev"; }
  bool Simulated() const override { return false; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override;

 private:
  struct EntryPoints {
    HETPOOL_CNDEV_REQUIRED(HETPOOL_ENTRY_POINT_MEMBER)
    HETPOOL_CNDEV_OPTIONAL(HETPOOL_ENTRY_POINT_MEMBER)
  };
  CndevBackend(std::unique_ptr<DynamicLibrary> lib, EntryPoints t) : lib_(std::move(lib)), cndev_(t) {}
  std::string Error(cndevRet_t rc) const;
  // The processes holding the card (cndevGetProcessInfo); empty when CNDev cannot tell.
  std::vector<CardProcess> Processes(cndevDevice_t handle) const;
  // The card's health state, ECC, retired pages and remapped rows as signals.
  void AddHealthSignals(cndevDevice_t handle, DeviceRecord& d) const;

  std::unique_ptr<DynamicLibrary> lib_;
  EntryPoints cndev_;
};

}  // namespace hetpool::drivers
