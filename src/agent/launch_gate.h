// The launch gate: a launch whose account still runs another user's job, or whose card a process
// of no job holds, waits instead of starting. The gate keeps which launches wait and why (the
// heartbeat reports them, so the daemon neither counts them lost nor gives their cards away), and
// the orders they came in, applied again until none waits. Says each reason once, not each pass.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "google/protobuf/repeated_ptr_field.h"
#include "hetpool/v1/agent.pb.h"
#include "src/agent/runner.h"

namespace hetpool::agent {

struct LaunchGateProbes {
  // Runner::UidHolder: whose processes still run as this uid for another user, "" when none.
  std::function<std::string(uid_t uid, const std::string& user)> uid_holder;
  // "nvidia0: pid 4242 (...) holds 2658 MiB" for those of the cards a process of no job holds.
  std::function<std::string(const std::vector<std::string>& device_ids)> dirty_cards;
};

class LaunchGate {
 public:
  explicit LaunchGate(LaunchGateProbes probes) : probes_(std::move(probes)) {}

  // Why `spec` must wait before it may start, "" when it need not. A refused launch never waits:
  // it "starts" at once, failing.
  std::string WhyHeld(const LaunchSpec& spec) const;

  // One pass over an orders set: Begin, then Admit for each launch not yet started (false: it
  // waits), then End with the set, kept while any launch of it waits.
  void Begin() { next_.clear(); }
  bool Admit(const Runner::Key& key, const LaunchSpec& spec);
  void End(const hetpool::v1::Orders& orders);

  // The orders to apply again (some launch of them waits), if any.
  const std::optional<hetpool::v1::Orders>& held_orders() const { return held_orders_; }
  size_t held() const { return held_.size(); }
  // One ProcessStatus (waiting, with its cards) per launch that waits.
  void Report(google::protobuf::RepeatedPtrField<hetpool::v1::ProcessStatus>& out) const;

 private:
  struct HeldLaunch {
    std::string why;  // ProcessStatus.waiting
    std::vector<std::string> device_ids;
  };
  LaunchGateProbes probes_;
  std::map<Runner::Key, HeldLaunch> held_;
  std::map<Runner::Key, HeldLaunch> next_;  // the pass under way
  std::optional<hetpool::v1::Orders> held_orders_;
};

}  // namespace hetpool::agent
