// MetaX GPUs (C500 and kin) through MXSML (libmxsml.so, also under /opt/mxdriver/lib and
// /opt/maca/lib), loaded at run time.
#pragma once

#include <memory>

#include "drivers/device_backend.h"
#include "drivers/dl/dynamic_library.h"
#include "drivers/mxsml/mxsml_abi.h"

namespace hetpool::drivers {

class MxsmlBackend : public DeviceBackend {
 public:
  static absl::StatusOr<std::unique_ptr<MxsmlBackend>> Load(const std::vector<std::string>& candidates);

  absl::string_view Name() const override { return "mxsml"; }
  bool Simulated() const override { return false; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override;

 private:
  struct EntryPoints {
    HETPOOL_MXSML_REQUIRED(HETPOOL_ENTRY_POINT_MEMBER)
    HETPOOL_MXSML_OPTIONAL(HETPOOL_ENTRY_POINT_MEMBER)
  };
  MxsmlBackend(std::unique_ptr<DynamicLibrary> lib, EntryPoints t) : lib_(std::move(lib)), mxsml_(t) {}
  std::string Error(mxSmlReturn_t rc) const;
  // The processes holding card `index` (mxSmlGetSingleGpuProcess) with their memory on the card
  // whose gpuId is `gpu_id`; empty when MXSML cannot tell.
  std::vector<CardProcess> Processes(unsigned index, unsigned gpu_id) const;
  // Why the card is unavailable, its ECC counts and its PCIe link, as signals.
  void AddHealthSignals(unsigned index, DeviceRecord& d) const;

  std::unique_ptr<DynamicLibrary> lib_;
  EntryPoints mxsml_;
};

}  // namespace hetpool::drivers
