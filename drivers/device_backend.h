// DeviceBackend: one way of discovering a node's devices (a vendor library, sysfs, a simulation).
// The agent asks every enabled backend and merges their answers into one NodeInventory.
#pragma once

#include "absl/strings/string_view.h"
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetpool/device.h"

namespace hetpool::drivers {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Short name used in --backend and in inventories ("sim", "nvml", ...).
  virtual absl::string_view Name() const = 0;
  // True when the devices cannot run vendor kernels (jobs then run on CPU with gloo).
  virtual bool Simulated() const = 0;
  // Current devices with health and memory use. Called once at start and on every refresh.
  virtual absl::StatusOr<std::vector<DeviceRecord>> Discover() = 0;
  // The processes on each card: records with what names the card (id, uuid, PCI bus id) and
  // `processes` filled. The agent asks before each launch whether a stranger holds its cards, so
  // a library that can answer without a whole discovery should; by default, a whole discovery.
  virtual absl::StatusOr<std::vector<DeviceRecord>> CardProcesses() { return Discover(); }
  // Starts watching for health events the library raises between discoveries (NVML's Xid
  // events), calling `changed` from the watch's thread when one comes, so that the agent
  // discovers again at once instead of at its next refresh. Backends without events ignore it.
  // Returns what it watches, in words, for the agent's log ("Xid events on 8 card(s)"), or "".
  virtual std::string WatchHealth(std::function<void()> changed) {
    (void)changed;
    return "";
  }
};

}  // namespace hetpool::drivers
