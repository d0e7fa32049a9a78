#include "src/agent/fence_timer.h"

#include <algorithm>

namespace hetpool::agent {

void FenceTimer::Registered(const hetpool::v1::RegisterResponse& resp) {
  fenced_ = false;
  // Older daemons announce no orphan grace: then 80% of their lease. Never wait longer than the
  // daemon does, whatever the flag says.
  const absl::Duration announced = resp.orphan_grace_ms() > 0 ? absl::Milliseconds(resp.orphan_grace_ms())
                                                              : absl::Milliseconds(resp.lease_ttl_ms()) * 0.8;
  if (!flag_.has_value()) {
    fence_after_ = announced;
  } else if (*flag_ <= absl::ZeroDuration()) {
    fence_after_ = absl::ZeroDuration();  // never: the operator's explicit choice
  } else {
    fence_after_ = std::min(*flag_, announced);
  }
  lease_ttl_ = absl::Milliseconds(resp.lease_ttl_ms());
  Contacted();
}

void FenceTimer::Contacted() {
  last_contact_ = clock_();
  if (watchdog_ == nullptr) return;
  // The agent fences first (SIGTERM, then SIGKILL after --kill-grace); the watchdog is the
  // backstop, half a lease later, which is still before the daemon gives the jobs away (a lease
  // plus the grace after the last heartbeat it received).
  watchdog_->RenewUntil(fence_after_ > absl::ZeroDuration() ? fence_after_ + lease_ttl_ / 2 : absl::InfiniteDuration());
}

bool FenceTimer::CutOffNow() {
  if (fenced_ || fence_after_ <= absl::ZeroDuration() || since_contact() < fence_after_) return false;
  fenced_ = true;
  return true;
}

}  // namespace hetpool::agent
