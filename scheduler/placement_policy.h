// The placement interface the daemon schedules through. v1 ships first fit (first_fit.h); the
// topology-aware plugin pipeline replaces it behind this same interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drivers/fingerprint/can_run.h"
#include "hetpool/device.h"

namespace hetpool::scheduler {

struct DeviceView {
  const DeviceRecord* device = nullptr;
  bool free = false;  // not held by any job (including processes still being stopped)
};

struct NodeView {
  std::string name;
  bool schedulable = false;  // Ready and not drained
  std::vector<DeviceView> devices;
  drivers::RunContext context;  // torch plugins on the node, translation layers enabled
};

struct Requirements {
  std::vector<Vendor> vendors;      // empty = any
  std::vector<std::string> models;  // empty = any
  drivers::RunRequirements run;     // code, precisions, memory per device, versions (CanRun)
};

struct PlacementRequest {
  int nnodes = 1;
  int devices_per_node = 0;  // 0 = a CPU job: no devices, any node
  Requirements requirements;
};

struct NodeAssignment {
  std::string node;
  std::vector<std::string> device_ids;
  int link_score = 0;  // average pairwise link score of the devices (topology_policy.h)
};

struct Placement {
  Vendor vendor = Vendor::kCpu;  // every rank of a job shares one collective domain
  std::vector<NodeAssignment> nodes;  // in node-rank order
};

// Result meaning follows the Kubernetes scheduler: UNAVAILABLE = cannot be placed now but may be
// later (capacity busy); FAILED_PRECONDITION = no node of the pool could ever run it.
class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual absl::StatusOr<Placement> Place(const PlacementRequest& request,
                                          const std::vector<NodeView>& nodes) = 0;
};

// Whether a device could run the job at all (ignoring whether it is free or healthy), and why not.
drivers::CanRunResult Qualifies(const DeviceRecord& device, const Requirements& requirements,
                                const drivers::RunContext& node);

// Whether the requirements admit a CPU-only placement (devices_per_node == 0).
bool AllowsCpu(const Requirements& requirements);

}  // namespace hetpool::scheduler
