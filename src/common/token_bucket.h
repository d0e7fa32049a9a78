// A token bucket: tokens come back at `rate_per_second` up to `burst`, and it starts full. Taking
// more than it holds leaves it in debt, so the next taker waits the longer. Used where hetpool
// bounds a rate with room for bursts (submissions per user, hetpoold's defragmentation moves).
// Not thread-safe: its owner locks.
#pragma once

#include <algorithm>

#include "absl/time/time.h"

namespace hetpool {

class TokenBucket {
 public:
  TokenBucket(double rate_per_second, double burst) : rate_(rate_per_second), burst_(burst), tokens_(burst) {}

  // What it holds at `now` (refilled since the last call; the first call finds it full).
  double Refill(absl::Time now) {
    tokens_ = Held(now);
    updated_ = now;  // after a clock that went back, refills count from its new reading
    return tokens_;
  }
  // What it would hold at `now`, without changing it. A `now` before the last update (a clock
  // that went back) refills nothing and takes nothing: callers pass MonotonicNow(), which does
  // not go back, and a wall clock stepped back must not put every user in hours of debt.
  double Held(absl::Time now) const {
    if (updated_ == absl::InfinitePast() || now <= updated_) return tokens_;
    return std::min(burst_, tokens_ + rate_ * absl::ToDoubleSeconds(now - updated_));
  }
  void Take(double tokens) { tokens_ -= tokens; }
  double burst() const { return burst_; }

 private:
  double rate_;
  double burst_;
  double tokens_;
  absl::Time updated_ = absl::InfinitePast();
};

}  // namespace hetpool
