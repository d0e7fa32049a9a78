// Turns a discovered device into its canonical capability record and a stable short fingerprint
// id. The id depends on capability fields only (never serials or bus ids), so identical cards on
// different nodes share it and form one class for the scheduler, the planner and the operator.
#pragma once

#include <string>

#include "drivers/fingerprint/spec_table.h"
#include "hetpool/device.h"

namespace hetpool::drivers {

// Fills device.capability (ISA family, precisions, bandwidth, peaks, collective), the
// architecture when the backend did not report one, and device.fingerprint.
void ApplyFingerprint(const SpecTable& specs, DeviceRecord& device);

// "nvidia H100-SXM sm_90 80GiB": the human name of a fingerprint class.
std::string FingerprintLabel(const DeviceRecord& device);

}  // namespace hetpool::drivers
