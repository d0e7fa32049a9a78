// What the parts of ClusterState tell the facade that owns the lock and the condition variable:
// "something changed" (job watchers, order streams and the loop wake up), and "capacity may have
// been freed" (the next tick passes over the whole queue, not only the new submissions).
// Thread-free: called under the facade's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

namespace hetpool::daemon {

class Wakeups {
 public:
  explicit Wakeups(std::function<void()> on_change = {}) : on_change_(std::move(on_change)) {}

  void Changed() {
    ++changes_;
    if (on_change_) on_change_();
  }
  void CapacityChanged() { capacity_changed_ = true; }
  // Whether capacity changed since the last call; the flag is cleared.
  bool TakeCapacityChanged() { return std::exchange(capacity_changed_, false); }
  bool capacity_changed() const { return capacity_changed_; }
  uint64_t changes() const { return changes_; }

 private:
  std::function<void()> on_change_;
  uint64_t changes_ = 0;
  bool capacity_changed_ = false;
};

}  // namespace hetpool::daemon
