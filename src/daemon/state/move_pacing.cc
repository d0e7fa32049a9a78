#include "src/daemon/state/move_pacing.h"

#include <algorithm>

namespace hetpool::daemon {

MovePacing::MovePacing(int moves_per_hour, int burst)
    : moves_per_hour_(moves_per_hour),
      bucket_(moves_per_hour / 3600.0, burst > 0 ? std::min(burst, moves_per_hour) : moves_per_hour) {}

MovePacing::Allowance MovePacing::Now(absl::Time now) {
  while (!moves_.empty() && moves_.front() <= now - absl::Hours(1)) moves_.pop_front();
  Allowance allowance;
  allowance.hour_left = moves_per_hour_ - static_cast<int>(moves_.size());
  const double tokens = bucket_.Refill(now);
  if (allowance.hour_left <= 0 || tokens < 1) return allowance;
  allowance.now =
      tokens >= bucket_.burst() ? allowance.hour_left : std::min(allowance.hour_left, static_cast<int>(tokens));
  return allowance;
}

void MovePacing::Took(int moves, absl::Time now) {
  for (int i = 0; i < moves; ++i) moves_.push_back(now);
  bucket_.Take(moves);
}

}  // namespace hetpool::daemon
