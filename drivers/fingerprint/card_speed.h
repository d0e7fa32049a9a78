// How fast a card computes for a job, from the dense peaks its fingerprint carries (the spec table,
// docs/fingerprints.md): what orders vendors for a job across vendors and splits its batch.
#pragma once

#include <optional>
#include <set>

#include "hetpool/device.h"

namespace hetpool::drivers {

// The precision a job computes in: the fastest of those it requires (fp8 before bf16 before fp32),
// bf16 when it names none (what training and serving use on every accelerator hetpool knows).
Precision ComputePrecision(const std::set<Precision>& required);

// The card's dense peak TFLOPS in that precision, when its spec says; nullopt when unknown (a
// MetaX C500's bf16 until an operator's spec table gives it).
std::optional<double> PeakTflops(const DeviceRecord& device, Precision precision);

}  // namespace hetpool::drivers
