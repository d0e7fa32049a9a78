#include "src/agent/card_process_query.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace hetpool::agent {

std::vector<std::pair<std::string, CardProcess>> CardProcessQuery::Now() const {
  std::vector<std::pair<std::string, CardProcess>> out;
  for (const auto& backend : *backends_) {
    if (backend->Simulated()) continue;
    auto cards = backend->CardProcesses();
    if (!cards.ok()) {
      spdlog::debug("{}: card processes: {}", std::string(backend->Name()), std::string(cards.status().message()));
      continue;
    }
    for (const auto& card : *cards) {
      const std::string id = tracker_->IdOf(card);
      if (id.empty()) continue;
      for (const auto& process : card.processes) out.emplace_back(id, process);
    }
  }
  return out;
}

std::string CardProcessQuery::DirtyCards(const std::vector<std::string>& device_ids,
                                         const std::vector<JobOwnership>& running) const {
  std::vector<DeviceRecord> cards;
  for (const auto& id : device_ids) cards.push_back(DeviceRecord{.id = id});
  for (auto& [id, process] : Now()) {
    auto card = std::find_if(cards.begin(), cards.end(), [&](const DeviceRecord& d) { return d.id == id; });
    if (card != cards.end()) card->processes.push_back(process);
  }
  AttributeCardProcesses(cards, running, read_);
  std::vector<std::string> dirty;
  for (const auto& card : cards) {
    if (!card.dirty.empty()) dirty.push_back(absl::StrCat(card.id, ": ", card.dirty));
  }
  return absl::StrJoin(dirty, "; ");
}

}  // namespace hetpool::agent
