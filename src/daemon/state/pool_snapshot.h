// A point-in-time copy of what operators chart: every card with its allocation and telemetry,
// every node's lease, and the queue by state and priority. Taken under the state's lock, read
// without it (metrics scrapes, the dashboard).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hetpool::daemon {

struct DeviceSample {
  std::string node;
  std::string device;
  std::string vendor;
  std::string model;
  std::string fingerprint;
  bool healthy = true;
  bool schedulable = true;          // its node is Ready and not drained
  int32_t allocated_milli = 0;      // 1000 = held whole; fractional claims add their share
  uint64_t memory_mib = 0;
  uint64_t memory_used_mib = 0;     // as the agent last reported
  int utilization_percent = -1;     // -1: the backend cannot tell
};

struct NodeSample {
  std::string name;
  bool ready = false;
  bool drained = false;
  double seconds_since_heartbeat = 0;
};

struct PoolSnapshot {
  std::vector<DeviceSample> devices;
  std::vector<NodeSample> nodes;
  std::map<std::pair<int, int>, int64_t> jobs;  // (JobState, priority) -> count
};

}  // namespace hetpool::daemon
