// What NVML says of a card's health, as hetpool's signals (device.h's HealthSignal): the Xid of
// a critical-error event and the clock event reasons read at each discovery (the memory counters
// and the PCIe link are health_signals.h's, shared with the other vendors). The Xid table
// follows NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors): the Xids an application
// causes (13, 31, 43, 45, 68, 109) are noted, never held against the card.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "drivers/nvml/nvml_abi.h"
#include "hetpool/device.h"

namespace hetpool::drivers {

// The signal an Xid critical-error event raises on its card.
HealthSignal SignalOfXid(unsigned long long xid);

// nvmlDeviceGetCurrentClocksThrottleReasons' mask: the hardware slowing the card down (its
// slowdown signal, a thermal or power brake) or the driver doing so for heat makes it degraded;
// idling, a power cap under load and the application's own clocks say nothing of the card.
std::optional<HealthSignal> SignalOfClockReasons(unsigned long long reasons);

// NVLink recovery errors (nvmlDeviceGetNvLinkErrorCounter, NVML_NVLINK_ERROR_DL_RECOVERY) on the
// active links named: a link that had to retrain runs slow or drops, so the card is degraded
// (replays and CRC errors are corrected in line and counted in health, not held against it).
std::optional<HealthSignal> SignalOfNvLinkRecoveries(unsigned long long recoveries,
                                                     const std::vector<std::string>& links);

}  // namespace hetpool::drivers
