// What each user and group holds (from the claims on the nodes) checked against the quota table:
// the scheduler's Quota filter asks it whether a job's owner may take more cards of a class
// (PlacementRequest.quota_blocked), and Submit refuses
// what could never run under the owner's quota (or, with on_exceed "reject", what is over it now).
#pragma once

#include <functional>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hetpool/device.h"
#include "hetpool/v1/job.pb.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/security/quota.h"

namespace hetpool::daemon {

// Milli-cards a job holds in all: nodes x devices x share (0 for CPU jobs).
int64_t CardsNeeded(const hetpool::v1::JobSpec& spec);

// The class a card counts in (quotas, fair share).
CardClass CardClassOf(const DeviceRecord& device);

// Calls `card` with each device of a placement just made (looked up in the views it was made on)
// and the milli-cards it holds there.
void ForEachPlacedCard(const scheduler::Placement& placement, const std::vector<scheduler::NodeView>& views,
                       const std::function<void(const DeviceRecord&, int64_t)>& card);

class QuotaLedger {
 public:
  explicit QuotaLedger(const QuotaTable& table) : table_(table) {}

  void Hold(const std::string& user, const std::string& group, const DeviceRecord& device, int64_t milli);
  // Records a placement just made (its devices looked up in the views it was made on).
  void HoldPlacement(const hetpool::v1::JobSpec& spec, const scheduler::Placement& placement,
                     const std::vector<scheduler::NodeView>& views);

  // Why the job's owner may not take `spec`'s cards of this device's class now, if so.
  std::optional<std::string> Blocked(const hetpool::v1::JobSpec& spec, const DeviceRecord& device) const;
  // Same, as if the owner held nothing: the quota alone rules the job out.
  std::optional<std::string> BlockedAlways(const hetpool::v1::JobSpec& spec, const DeviceRecord& device) const;

 private:
  const QuotaTable& table_;
  std::map<std::string, CardHoldings> users_;
  std::map<std::string, CardHoldings> groups_;
};

}  // namespace hetpool::daemon
