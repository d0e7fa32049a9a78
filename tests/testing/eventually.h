// Waiting for a condition in a test: every `every` until it holds or `patience` runs out, on the
// monotonic clock. What tests wait with instead of a fixed sleep (a loaded machine takes longer)
// or a loop of their own.
#pragma once

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::testing {

// Whether `condition` held before `patience` ran out (it is asked at least once).
inline bool Eventually(const std::function<bool()>& condition, absl::Duration patience,
                       absl::Duration every = absl::Milliseconds(100)) {
  const absl::Time deadline = MonotonicNow() + patience;
  while (true) {
    if (condition()) return true;
    if (MonotonicNow() >= deadline) return false;
    absl::SleepFor(every);
  }
}

}  // namespace hetpool::testing
