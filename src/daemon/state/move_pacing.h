// How many defragmentation moves may go now: one rule for --defrag-moves-per-hour and
// --defrag-move-burst. At most moves_per_hour within any hour; of those, at most `burst` at once,
// the rest spread at moves_per_hour (a token bucket of `burst` refilled at that rate). A set of
// moves as large as the burst may go once the bucket holds the burst, and leaves it in debt (the
// next set waits the longer). Times are the monotonic clock's.
#pragma once

#include <deque>

#include "absl/time/time.h"
#include "src/common/token_bucket.h"

namespace hetpool::daemon {

class MovePacing {
 public:
  // burst zero, or moves_per_hour and above: the hour's moves may all go at once.
  MovePacing(int moves_per_hour, int burst);

  struct Allowance {
    int hour_left = 0;  // moves the last hour leaves (the most one choice may ever need)
    int now = 0;        // moves that may go at once; 0: none now
  };
  Allowance Now(absl::Time now);
  void Took(int moves, absl::Time now);

 private:
  const int moves_per_hour_;
  std::deque<absl::Time> moves_;  // the last hour's
  TokenBucket bucket_;
};

}  // namespace hetpool::daemon
