#include "src/common/monotonic_clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace hetpool {

absl::Time MonotonicNow() {
  // Read once per process, together: every later reading is this wall time plus steady time.
  static const auto anchor = [] { return std::pair{absl::Now(), std::chrono::steady_clock::now()}; }();
  return anchor.first + absl::FromChrono(std::chrono::steady_clock::now() - anchor.second);
}

}  // namespace hetpool
