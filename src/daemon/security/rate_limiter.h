// Per-user token buckets for SubmitJob: `rate` submissions a second on average, bursts of up to
// `burst`. A user over the limit gets RESOURCE_EXHAUSTED saying when to retry; others are not
// slowed. The clock is injected so tests are exact.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/common/monotonic_clock.h"
#include "src/common/token_bucket.h"

namespace hetpool::daemon {

class RateLimiter {
 public:
  // rate <= 0: unlimited.
  // `clock` runs deadlines (src/common/monotonic_clock.h): retry times must not follow steps of
  // the wall clock.
  RateLimiter(double rate, double burst, std::function<absl::Time()> clock = MonotonicNow);
  absl::Status Admit(const std::string& user);

 private:
  const double rate_;
  const double burst_;
  std::function<absl::Time()> clock_;
  absl::Mutex mu_;
  std::map<std::string, TokenBucket> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetpool::daemon
