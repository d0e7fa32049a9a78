#include "src/daemon/state/card_holds.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"

namespace hetpool::daemon {

std::vector<std::string> CardHolds::Preemptors() const {
  std::vector<std::pair<uint64_t, std::string>> ordered;
  for (const auto& [id, hold] : holds_) ordered.emplace_back(hold.seq, id);
  std::sort(ordered.begin(), ordered.end());
  std::vector<std::string> out;
  for (auto& [seq, id] : ordered) out.push_back(std::move(id));
  return out;
}

bool CardHolds::VictimsGone(const std::string& job_id) const {
  auto it = holds_.find(job_id);
  if (it == holds_.end()) return true;
  const Hold& hold = it->second;
  for (const auto& [name, key] : hold.claims) {
    const NodeEntry* node = nodes_.Find(name);
    if (node == nullptr) continue;
    if (node->claims.contains(key)) return false;
    // Restored after a restart: a node that has not registered again may still run them.
    if (node->session_id.empty() && jobs_.Now() < hold.nodes_until) return false;
  }
  return true;
}

pb::CardHold CardHolds::ToProto(const Hold& hold) {
  pb::CardHold out;
  out.set_seq(hold.seq);
  for (const auto& [node, devices] : hold.cards) {
    auto* cards = out.add_cards();
    cards->set_node(node);
    for (const auto& d : devices) cards->add_device_ids(d);
  }
  for (const auto& [node, key] : hold.claims) {
    auto* claim = out.add_waiting_for();
    claim->set_node(node);
    claim->set_job_id(key.first);
    claim->set_generation(key.second);
  }
  return out;
}

CardHolds::Hold CardHolds::FromProto(const pb::CardHold& stored) {
  Hold hold;
  hold.seq = stored.seq();
  for (const auto& cards : stored.cards())
    hold.cards[cards.node()].insert(cards.device_ids().begin(), cards.device_ids().end());
  for (const auto& claim : stored.waiting_for())
    hold.claims.push_back({claim.node(), {claim.job_id(), claim.generation()}});
  return hold;
}

void CardHolds::HoldFor(const std::string& job_id_ref, const scheduler::Placement& placement,
                        std::vector<std::pair<std::string, JobGen>> claims, std::optional<absl::Time> moved_for_at) {
  const std::string job_id = job_id_ref;  // callers pass the job's own id, which the commit below replaces
  Hold hold;
  hold.seq = next_seq_++;
  for (const auto& assignment : placement.nodes) {
    hold.cards[assignment.node].insert(assignment.device_ids.begin(), assignment.device_ids.end());
  }
  hold.claims = std::move(claims);
  if (JobEntry* entry = jobs_.Find(job_id)) {
    pb::Job next = entry->job();
    *next.mutable_hold() = ToProto(hold);
    if (moved_for_at) *next.mutable_moved_for_at() = ToProtoTime(*moved_for_at);
    // Refused by the store, the hold still counts in this daemon; only a restart would forget it
    // (as every daemon did before holds were stored).
    if (absl::Status s = jobs_.Commit(*entry, std::move(next)); !s.ok()) {
      spdlog::warn("job {}: its hold on the cards of the jobs it stopped was not stored: {}", job_id,
                   std::string(s.message()));
    }
  }
  holds_[job_id] = std::move(hold);
}

void CardHolds::Release(const std::string& job_id) {
  holds_.erase(job_id);
  JobEntry* entry = jobs_.Find(job_id);
  if (entry == nullptr || !entry->job().has_hold()) return;
  entry->mutable_job().clear_hold();
  jobs_.Touch(*entry);  // stored with its next change; a stale stored hold only waits on nothing
}

void CardHolds::RestoreHolds(absl::Time now, absl::Duration patience) {
  for (JobEntry* pending : jobs_.Pending(nullptr)) {
    JobEntry& entry = *pending;
    if (!entry.job().has_hold()) continue;
    const std::string& id = entry.job().id();
    Hold hold = FromProto(entry.job().hold());
    hold.nodes_until = now + patience;
    if (entry.job().pending().preempting().empty()) {  // said after the hold was stored: say it again
      std::set<std::string> victims;
      for (const auto& [node, key] : hold.claims) victims.insert(key.first);
      entry.mutable_job().mutable_pending()->set_preempting(absl::StrJoin(victims, ","));
    }
    next_seq_ = std::max(next_seq_, hold.seq + 1);
    holds_[id] = std::move(hold);
  }
}

HeldCards CardHolds::HeldForPreemptors(const std::string& except) const {
  HeldCards out;
  for (const auto& [id, hold] : holds_) {
    if (id == except) continue;
    for (const auto& [node, devices] : hold.cards) out[node].insert(devices.begin(), devices.end());
  }
  return out;
}

}  // namespace hetpool::daemon
