#include "src/daemon/security/rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hetpool::daemon {

constexpr size_t kMaxIdleBuckets = 4096;

RateLimiter::RateLimiter(double rate, double burst, std::function<absl::Time()> clock)
    : rate_(rate), burst_(std::max(burst, 1.0)), clock_(std::move(clock)) {}

absl::Status RateLimiter::Admit(const std::string& user) {
  if (rate_ <= 0) return absl::OkStatus();
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  if (buckets_.size() > kMaxIdleBuckets) {
    // A bucket that has refilled is the same as none: forget those, so the map stays small.
    for (auto i = buckets_.begin(); i != buckets_.end();) {
      i = i->second.Held(now) >= burst_ ? buckets_.erase(i) : std::next(i);
    }
  }
  TokenBucket& bucket = buckets_.try_emplace(user, rate_, burst_).first->second;
  const double tokens = bucket.Refill(now);
  if (tokens >= 1.0) {
    bucket.Take(1.0);
    return absl::OkStatus();
  }
  const double wait_s = (1.0 - tokens) / rate_;
  return absl::ResourceExhaustedError(
      absl::StrFormat("rate limit: %s may submit %g jobs/s (bursts of %g); retry in %.0f ms", user, rate_, burst_,
                      std::ceil(wait_s * 1000)));
}

}  // namespace hetpool::daemon
