#include "src/daemon/state/quota_ledger.h"

#include "hetpool/vendor.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {
namespace {

const CardHoldings& Of(const std::map<std::string, CardHoldings>& by_owner, const std::string& owner) {
  static const CardHoldings kNone;
  auto it = by_owner.find(owner);
  return it == by_owner.end() ? kNone : it->second;
}

}  // namespace

int64_t CardsNeeded(const hetpool::v1::JobSpec& spec) {
  const int64_t share = spec.device_milli() > 0 && spec.device_milli() < 1000 ? spec.device_milli() : 1000;
  return TotalCards(spec) * share;
}

CardClass CardClassOf(const DeviceRecord& device) {
  return {std::string(VendorName(device.vendor)), device.fingerprint};
}

void QuotaLedger::Hold(const std::string& user, const std::string& group, const DeviceRecord& device, int64_t milli) {
  const CardClass key = CardClassOf(device);
  users_[user][key] += milli;
  if (!group.empty()) groups_[group][key] += milli;
}

void ForEachPlacedCard(const scheduler::Placement& placement, const std::vector<scheduler::NodeView>& views,
                       const std::function<void(const DeviceRecord&, int64_t)>& card) {
  for (const auto& assignment : placement.nodes) {
    for (const auto& view : views) {
      if (view.name != assignment.node) continue;
      for (const auto& dv : view.devices) {
        for (const auto& id : assignment.device_ids) {
          if (dv.device->id == id) card(*dv.device, assignment.device_milli);
        }
      }
    }
  }
}

void QuotaLedger::HoldPlacement(const hetpool::v1::JobSpec& spec, const scheduler::Placement& placement,
                                const std::vector<scheduler::NodeView>& views) {
  ForEachPlacedCard(placement, views,
                    [&](const DeviceRecord& device, int64_t milli) { Hold(spec.user(), spec.group(), device, milli); });
}

std::optional<std::string> QuotaLedger::Blocked(const hetpool::v1::JobSpec& spec, const DeviceRecord& device) const {
  return table_.CardsBlocked(spec.user(), Of(users_, spec.user()), spec.group(), Of(groups_, spec.group()),
                             std::string(VendorName(device.vendor)), device.fingerprint, CardsNeeded(spec));
}

std::optional<std::string> QuotaLedger::BlockedAlways(const hetpool::v1::JobSpec& spec,
                                                      const DeviceRecord& device) const {
  return table_.CardsBlocked(spec.user(), {}, spec.group(), {}, std::string(VendorName(device.vendor)),
                             device.fingerprint, CardsNeeded(spec));
}

}  // namespace hetpool::daemon
