// Which processes hold the node's cards now, asked of the vendor libraries alone (their process
// lists, not a whole discovery: DeviceBackend::CardProcesses), by the stable ids the inventory
// gave the cards. The runner asks at every job's exit (what it left on its cards) and the launch
// gate before every launch (whether a stranger holds its cards).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "drivers/device_backend.h"
#include "drivers/inventory_tracker.h"
#include "src/agent/card_holders.h"

namespace hetpool::agent {

class CardProcessQuery {
 public:
  // Both outlive the query. Simulated backends are not asked: their cards run no processes.
  CardProcessQuery(const std::vector<std::unique_ptr<drivers::DeviceBackend>>* backends,
                   const drivers::InventoryTracker* tracker, ProcessReader read = ReadProcessFacts)
      : backends_(backends), tracker_(tracker), read_(std::move(read)) {}

  // Every process on the cards, by the card's id; empty when no backend can tell. A card the
  // inventory has not seen yet is left out (it takes no job before it is reported).
  std::vector<std::pair<std::string, CardProcess>> Now() const;

  // "nvidia0: pid 4242 (uid 0, python3) holds 2658 MiB" for those of `device_ids` that a process
  // of none of `running` holds now (card_holders.h), "" when they are clean.
  std::string DirtyCards(const std::vector<std::string>& device_ids, const std::vector<JobOwnership>& running) const;

 private:
  const std::vector<std::unique_ptr<drivers::DeviceBackend>>* backends_;
  const drivers::InventoryTracker* tracker_;
  ProcessReader read_;
};

}  // namespace hetpool::agent
