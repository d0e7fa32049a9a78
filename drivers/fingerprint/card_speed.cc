#include "drivers/fingerprint/card_speed.h"

#include <array>

namespace hetpool::drivers {

Precision ComputePrecision(const std::set<Precision>& required) {
  // Fastest first: a job that declares fp8 and fp32 does its matrix work in fp8.
  static constexpr std::array kFastestFirst = {Precision::kInt4, Precision::kFp8,  Precision::kInt8, Precision::kBf16,
                                               Precision::kFp16, Precision::kTf32, Precision::kFp32, Precision::kFp64};
  for (Precision p : kFastestFirst) {
    if (required.contains(p)) return p;
  }
  return Precision::kBf16;
}

std::optional<double> PeakTflops(const DeviceRecord& device, Precision precision) {
  auto it = device.capability.peak_tflops.find(precision);
  if (it == device.capability.peak_tflops.end() || it->second <= 0) return std::nullopt;
  return it->second;
}

}  // namespace hetpool::drivers
