// AgentReconciler's part for hardware faults (issue 61): a failure the hardware explains
// (hardware_signatures.h), a card's fatal health signal, the requeue that spends no restart, and
// the suspicion that quarantines a card (card_suspicion.h).
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/common/torchrun_lines.h"
#include "src/common/utf8.h"
#include "src/daemon/state/agent_reconciler.h"

namespace hetpool::daemon {
namespace {

constexpr char kFatalSignalReason[] = "fatal health signal";

// A card's quarantine record: since `now`, why, and each piece of evidence (bounded as a line).
pb::CardQuarantine Quarantine(const std::string& device_id, absl::Time now, const std::string& reason,
                              const std::vector<std::string>& evidence) {
  pb::CardQuarantine quarantine;
  quarantine.set_device_id(device_id);
  *quarantine.mutable_since() = ToProtoTime(now);
  quarantine.set_reason(reason);
  for (const std::string& e : evidence) quarantine.add_evidence(ValidUtf8(e, kMaxLineBytes));
  return quarantine;
}

// The cards of `node` a failed generation of `job` points at: torchrun names the rank that
// failed, and local rank i runs on the node's i-th card, so only that card; all of them when no
// rank is named. (Suspecting all eight cards of a job for one bad card had a neighbour that
// shared two such jobs with two bad cards quarantined for nothing.)
std::vector<std::string> SuspectDevices(const pb::Job& job, const std::string& node) {
  const pb::NodePlacement* p = PlacementOn(job, node);
  if (p == nullptr) return {};
  std::vector<std::string> device_ids(p->device_ids().begin(), p->device_ids().end());
  const int local_rank = job.failure().local_rank();
  if (job.failure().global_rank() >= 0 && local_rank >= 0 && local_rank < static_cast<int>(device_ids.size()) &&
      device_ids.size() > 1) {
    device_ids = {device_ids[static_cast<size_t>(local_rank)]};
  }
  return device_ids;
}

// `card` ("node/device") into a job's list of cards, unless it is there already.
void AddOnce(google::protobuf::RepeatedPtrField<std::string>& cards, const std::string& card) {
  if (std::find(cards.begin(), cards.end(), card) == cards.end()) *cards.Add() = card;
}

}  // namespace

absl::Status AgentReconciler::OnHardwareFailure(JobEntry& entry, pb::Job job, const std::string& node,
                                                const HardwareEvidence& evidence) {
  const std::vector<std::string> device_ids = SuspectDevices(job, node);
  const std::string line = ValidUtf8(evidence.line, kMaxLineBytes);
  const bool card_scope = evidence.signature->scope == FaultScope::kCard;
  const std::string said = absl::StrCat(job.id(), " g", job.generation(), ": ", line);
  if (card_scope) {
    SuspectCards(job, node, device_ids, said);
  } else if (evidence.signature->scope == FaultScope::kNode) {
    SuspectNode(job, node, said);
  }
  // Only a card-wide signature names cards: the others say nothing of one card more than another.
  return RequeueForHardware(entry, std::move(job), node, card_scope ? device_ids : std::vector<std::string>{},
                            evidence.signature->what, line);
}

absl::Status AgentReconciler::RequeueForHardware(JobEntry& entry, pb::Job job, const std::string& node,
                                                 const std::vector<std::string>& device_ids, const std::string& what,
                                                 const std::string& line) {
  std::vector<std::string> cards;
  for (const std::string& d : device_ids) cards.push_back(absl::StrCat(node, "/", d));
  pb::RankFailure& failure = *job.mutable_failure();
  failure.set_node(node);
  failure.set_hardware(what);
  failure.set_hardware_evidence(line);
  failure.clear_suspect_cards();
  for (const std::string& card : cards) failure.add_suspect_cards(card);
  const std::string said =
      absl::StrCat("hardware failure on ", node, " (", what,
                   cards.empty() ? "" : absl::StrCat(" on ", absl::StrJoin(cards, ", ")), "): ", line);
  for (const std::string& card : cards) AddOnce(*job.mutable_avoided_cards(), card);  // what it avoids next
  const int max_requeues = suspicion_.options().max_hardware_requeues;
  job.set_hardware_requeues(job.hardware_requeues() + 1);
  if (job.hardware_requeues() > max_requeues) {
    return FailOrRestart(
        entry, std::move(job), "HardwareSuspected",
        absl::StrCat("hardware suspected on ", job.avoided_cards_size(), " card(s) (",
                     absl::StrJoin(job.avoided_cards(), ", "), ") after ", max_requeues, " requeues; last: ", said),
        pb::FAILURE_ORIGIN_INFRASTRUCTURE, /*restartable=*/false);
  }
  std::string message = absl::StrCat(said, "; requeued on other cards without spending a restart (hardware requeue ",
                                     job.hardware_requeues(), " of ", max_requeues, ")");
  return StopGeneration(entry, std::move(job), "HardwareFailure", message, absl::StrCat("gang stopped: ", said));
}

void AgentReconciler::ActOnFatalSignals(NodeEntry& node) {
  if (suspicion_.options().return_cleared_cards) ReturnClearedCards(node);
  const std::string& name = node.record.name();
  for (const DeviceRecord& device : node.inventory.devices) {
    std::vector<std::string> fatal;
    for (const HealthSignal& s : device.signals) {
      if (s.severity == Severity::kFatal) fatal.push_back(absl::StrCat(s.source, ": ", s.what));
    }
    if (fatal.empty()) continue;
    const bool known = std::any_of(node.record.quarantined_cards().begin(), node.record.quarantined_cards().end(),
                                   [&](const pb::CardQuarantine& q) { return q.device_id() == device.id; });
    if (!known) {
      pb::CardQuarantine quarantine =
          Quarantine(device.id, jobs_.Now(), absl::StrCat(kFatalSignalReason, " (", fatal.front(), ")"), fatal);
      if (absl::Status s = nodes_.Quarantine(node, std::move(quarantine)); !s.ok()) {
        spdlog::error("card {}/{}: not quarantined: {}", name, device.id, std::string(s.message()));
      }
      QuarantineNodeOfManyCards(node);
    }
    // The jobs on the card end with it, whether or not their processes have noticed yet.
    std::vector<std::string> on_card;
    for (const auto& [key, claim] : node.claims) {
      if (!claim.desired) continue;
      if (std::find(claim.device_ids.begin(), claim.device_ids.end(), device.id) != claim.device_ids.end()) {
        on_card.push_back(key.first);
      }
    }
    for (const std::string& id : on_card) {
      JobEntry* entry = jobs_.Find(id);
      if (entry == nullptr) continue;
      RequeueForHardware(*entry, entry->job(), name, {device.id}, kFatalSignalReason,
                         ValidUtf8(fatal.front(), kMaxLineBytes))
          .IgnoreError();  // a refused store write is tried again with the node's next report
    }
  }
}

void AgentReconciler::NoteEarlyFailure(pb::Job& job, const std::string& node) {
  const absl::Duration window = suspicion_.options().early_failure;
  if (window <= absl::ZeroDuration() || job.state() != pb::JOB_STATE_RUNNING || !job.has_started_at()) return;
  const absl::Duration ran = jobs_.Now() - FromProtoTime(job.started_at());
  if (ran > window) return;
  std::vector<std::pair<std::string, std::string>> cards;
  for (const std::string& device : SuspectDevices(job, node)) {
    cards.emplace_back(node, device);
    // Its next generation is steered off the card, in case the card is the cause.
    constexpr int kMostShunned = 16;
    if (job.shunned_cards_size() < kMostShunned) AddOnce(*job.mutable_shunned_cards(), absl::StrCat(node, "/", device));
  }
  const std::string last = job.failure().last_lines_size() > 0
                               ? ValidUtf8(job.failure().last_lines(job.failure().last_lines_size() - 1), kMaxLineBytes)
                               : "";
  suspicion_.NoteEarlyFailure(
      job.id(), cards,
      absl::StrCat(job.id(), " g", job.generation(), ": exited with code ", job.failure().exit_code(), " after ",
                   absl::FormatDuration(absl::Trunc(ran, absl::Seconds(1))), last.empty() ? "" : ": ", last),
      jobs_.Now());
}

bool AgentReconciler::VindicateEarlyFailures(pb::Job& job) {
  if (!suspicion_.HasEarlyFailures(job.id())) return false;
  const bool succeeded = job.state() == pb::JOB_STATE_SUCCEEDED;
  const bool ran_past = job.state() == pb::JOB_STATE_RUNNING && job.has_started_at() &&
                        jobs_.Now() - FromProtoTime(job.started_at()) > suspicion_.options().early_failure;
  if (!succeeded && !ran_past) return false;
  std::vector<std::pair<std::string, std::string>> running_on;
  for (const pb::NodePlacement& p : job.placement()) {
    for (const std::string& d : p.device_ids()) running_on.emplace_back(p.node(), d);
  }
  const auto vindicated = suspicion_.TakeVindicated(job.id(), running_on, jobs_.Now());
  if (vindicated.empty()) return false;
  size_t cards = 0;
  for (const auto& [name, node] : nodes_.entries()) cards += node.inventory.devices.size();
  for (const auto& [card, evidence] : vindicated) {
    const int needed = suspicion_.EarlyFailuresNeeded(card, cards, jobs_.Now());
    SuspectCards(job, card.first, {card.second},
                 absl::StrCat(evidence, " (then ran past ", absl::FormatDuration(suspicion_.options().early_failure),
                              " on other cards)"),
                 "early (each then ran on elsewhere)", needed);
  }
  return true;
}

void AgentReconciler::ReturnClearedCards(NodeEntry& node) {
  if (!node.record.fault().empty()) return;  // its health check fails: nothing passes it
  // The signals are the agent's latest report (a quarantine overlays the card's health, not them).
  std::vector<std::string> cleared;
  for (const pb::CardQuarantine& q : node.record.quarantined_cards()) {
    if (!absl::StartsWith(q.reason(), kFatalSignalReason)) continue;  // jobs' failures need an operator
    for (const DeviceRecord& device : node.inventory.devices) {
      if (device.id != q.device_id()) continue;
      const bool fatal = std::any_of(device.signals.begin(), device.signals.end(),
                                     [](const HealthSignal& s) { return s.severity == Severity::kFatal; });
      if (!fatal) cleared.push_back(q.device_id());
    }
  }
  for (const std::string& device : cleared) {
    if (absl::Status s = nodes_.ReturnCard(node, device); !s.ok()) {
      spdlog::error("card {}/{}: not returned: {}", node.record.name(), device, std::string(s.message()));
      continue;
    }
    spdlog::warn(
        "audit: card {}/{} returned by itself: its fatal signal cleared and its node passes its health "
        "check (--return-cleared-cards)",
        node.record.name(), device);
  }
}

void AgentReconciler::SuspectCards(pb::Job& job, const std::string& node_name,
                                   const std::vector<std::string>& device_ids, const std::string& evidence,
                                   absl::string_view how, int needed) {
  NodeEntry* node = nodes_.Find(node_name);
  if (node == nullptr) return;
  const HardwareFaultOptions& rule = suspicion_.options();
  if (needed <= 0) needed = rule.quarantine_after;
  for (const std::string& device : device_ids) {
    auto counted = suspicion_.NoteFailure({node_name, device}, job.id(), evidence, jobs_.Now(), needed);
    if (!counted) continue;
    pb::CardQuarantine quarantine = Quarantine(
        device, jobs_.Now(),
        absl::StrCat(needed, " jobs failed on it ", how, " within ", absl::FormatDuration(rule.quarantine_window)),
        *counted);
    const std::string card = absl::StrCat(node_name, "/", device);
    if (absl::Status s = nodes_.Quarantine(*node, std::move(quarantine)); !s.ok()) {
      spdlog::error("card {}: not quarantined: {}", card, std::string(s.message()));
      continue;  // counted again at its next failure
    }
    suspicion_.Forget({node_name, device});
    jobs_.AddEvent(job, "CardQuarantined",
                   absl::StrCat("card ", card, " quarantined: ", needed, " jobs failed on it ", how));
  }
  QuarantineNodeOfManyCards(*node);
}

void AgentReconciler::SuspectNode(pb::Job& job, const std::string& node_name, const std::string& evidence) {
  NodeEntry* node = nodes_.Find(node_name);
  if (node == nullptr) return;
  const HardwareFaultOptions& rule = suspicion_.options();
  auto counted = suspicion_.NoteFailure({node_name, ""}, job.id(), evidence, jobs_.Now());
  if (!counted) return;
  pb::CardQuarantine quarantine = Quarantine(
      "", jobs_.Now(),
      absl::StrCat(rule.quarantine_after, " jobs failed on it with a node-wide signature (its network) within ",
                   absl::FormatDuration(rule.quarantine_window)),
      *counted);
  if (absl::Status s = nodes_.QuarantineNode(*node, std::move(quarantine)); !s.ok()) {
    spdlog::error("node {}: not quarantined: {}", node_name, std::string(s.message()));
    return;  // counted again at its next failure
  }
  suspicion_.Forget({node_name, ""});
  jobs_.AddEvent(job, "NodeQuarantined",
                 absl::StrCat("node ", node_name, " quarantined: ", node->record.quarantine().reason()));
}

void AgentReconciler::QuarantineNodeOfManyCards(NodeEntry& node) {
  const int after = suspicion_.options().quarantine_node_after_cards;
  if (after <= 0 || node.record.quarantined_cards_size() < after || node.record.has_quarantine()) return;
  std::vector<std::string> evidence;
  for (const pb::CardQuarantine& q : node.record.quarantined_cards()) {
    evidence.push_back(absl::StrCat(q.device_id(), ": ", q.reason()));
  }
  pb::CardQuarantine quarantine =
      Quarantine("", jobs_.Now(),
                 absl::StrCat(node.record.quarantined_cards_size(),
                              " of its cards quarantined: the fault may be the node's (power, PCIe switch, driver)"),
                 evidence);
  if (absl::Status s = nodes_.QuarantineNode(node, std::move(quarantine)); !s.ok()) {
    spdlog::error("node {}: not quarantined: {}", node.record.name(), std::string(s.message()));
  }
}

}  // namespace hetpool::daemon
