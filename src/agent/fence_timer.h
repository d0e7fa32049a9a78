// When the agent must fence: with no daemon answering for `fence_after`, the daemon may have given
// this node's jobs to others, so their processes here are stopped. The deadline is the one the
// daemon announced at registration (its orphan grace; 80% of its lease from older daemons), or the
// operator's --fence-after when shorter; zero means never. Each answer moves it, here and in the
// separate watchdog process that enforces it when the agent cannot (fence_watchdog.h).
#pragma once

#include <optional>

#include "absl/time/time.h"
#include "hetpool/v1/agent.pb.h"
#include "src/agent/fence_watchdog.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {

class FenceTimer {
 public:
  // `flag`: --fence-after (nullopt: the daemon's; zero or less: never). `watchdog` may be null.
  FenceTimer(std::optional<absl::Duration> flag, FenceWatchdog* watchdog, MonotonicClock clock = MonotonicNow)
      : flag_(flag), watchdog_(watchdog), clock_(std::move(clock)), last_contact_(clock_()) {}

  // A registration was accepted: the deadline from what the daemon announced, and a contact.
  void Registered(const hetpool::v1::RegisterResponse& resp);
  // A daemon answered: the fence moves to fence_after from now.
  void Contacted();
  // True once per outage, when no daemon has answered for fence_after: the caller stops the jobs.
  bool CutOffNow();
  bool fenced() const { return fenced_; }
  absl::Duration since_contact() const { return clock_() - last_contact_; }
  absl::Duration fence_after() const { return fence_after_; }
  absl::Duration lease_ttl() const { return lease_ttl_; }

 private:
  std::optional<absl::Duration> flag_;
  FenceWatchdog* watchdog_;
  MonotonicClock clock_;
  absl::Time last_contact_;
  absl::Duration fence_after_ = absl::ZeroDuration();  // known once a daemon has announced it
  absl::Duration lease_ttl_ = absl::ZeroDuration();
  bool fenced_ = false;
};

}  // namespace hetpool::agent
