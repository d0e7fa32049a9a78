// What a vendor library's health calls say of a card, as hetpool's signals (device.h's
// HealthSignal), the same words and severities whichever library read them: NVML, CNDev, MXSML
// and Level Zero Sysman each count uncorrected memory errors, rows or pages retired or waiting
// for a reset, and a PCIe link trained below its maximum. Each backend reads its own calls into
// these structs (a field left empty: the call failed or is not supported, so it says nothing);
// the meanings live here once. docs/reliability.md has the table with each call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "hetpool/device.h"

namespace hetpool::drivers {

struct MemoryHealth {
  std::optional<uint64_t> uncorrected_errors;  // since the driver loaded (volatile)
  std::optional<bool> rows_remap_pending, rows_remap_failed;
  std::optional<bool> retired_pages_pending, retired_pages_failed;
  std::optional<uint64_t> retired_pages;  // pages retired so far (noted: the card works around them)
};
// Fatal: uncorrected errors, remapping or retirement that failed (no spares left). Degraded: a
// remap or retirement waiting for a reset. Noted: pages retired.
std::vector<HealthSignal> SignalsOfMemory(const MemoryHealth& memory, absl::string_view source);

struct PcieLinkHealth {
  int width = 0, max_width = 0;  // lanes; 0: unknown
  int generation = 0, max_generation = 0;
};
// A link narrower than the card's maximum is degraded (a reseat or a riser fault halves its
// bandwidth for good). A lower generation is only noted: cards drop their link speed at idle
// to save power (NVIDIA's do), so the generation alone proves nothing.
std::optional<HealthSignal> SignalOfPcieLink(const PcieLinkHealth& link, absl::string_view source);

// The first fatal signal makes the card unhealthy, its words the card's health message.
void MarkUnhealthyOnFatal(DeviceRecord& device);

}  // namespace hetpool::drivers
