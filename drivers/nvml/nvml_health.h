// What NVML says of a card's health, as hetpool's signals (device.h's HealthSignal): the Xid of
// a critical-error event, and the memory error counters read at each discovery. The Xid table
// follows NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors): the Xids an application
// causes (13, 31, 43, 45, 68, 109) are noted, never held against the card.
#pragma once

#include <optional>
#include <vector>

#include "drivers/nvml/nvml_abi.h"
#include "hetpool/device.h"

namespace hetpool::drivers {

// The signal an Xid critical-error event raises on its card.
HealthSignal SignalOfXid(unsigned long long xid);

// The counters' signals, from what the NVML calls returned (nullopt: the call failed or is not
// supported, so the counter says nothing).
struct NvmlCounters {
  std::optional<unsigned long long> ecc_uncorrected_volatile;
  std::optional<bool> rows_remap_pending, rows_remap_failed;
  std::optional<bool> retired_pages_pending;
};
std::vector<HealthSignal> SignalsOfCounters(const NvmlCounters& counters);

}  // namespace hetpool::drivers
