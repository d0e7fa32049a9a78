// The clock for deadlines: leases, timeouts, grace periods, backoff, rate limits, pacing. It
// moves with CLOCK_MONOTONIC, so a step of the wall clock (an operator's `date -s`, NTP setting a
// clock that started wrong, a VM restored from a snapshot) neither stretches nor cuts a deadline:
// with deadlines on the wall clock stepped back an hour, a node killed with SIGKILL stayed Ready
// for that hour, and every submission was refused "retry in 7172040 ms" (issue 60, item 2).
//
// It is an absl::Time so that code keeps absl's arithmetic: the wall time when the process first
// read it, plus the monotonic time since. Only differences between two of its readings mean
// anything; it is never stored nor shown to people (stamps people read come from absl::Now()).
#pragma once

#include <functional>

#include "absl/time/time.h"

namespace hetpool {

absl::Time MonotonicNow();

// What parts that keep deadlines take, so that tests move time instead of sleeping.
using MonotonicClock = std::function<absl::Time()>;

}  // namespace hetpool
