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

// What a card's class is labelled with: one per vendor, model and fingerprint in the pool.
struct CardKind {
  std::string vendor;
  std::string model;
  std::string fingerprint;
};

// A card names its node and its kind by index: the snapshot is taken under the state lock, and
// at 5,000 nodes copying each of 40,000 cards' names and model strings held it 10-70 ms a scrape.
struct DeviceSample {
  uint32_t node = 0;  // index into PoolSnapshot::nodes
  uint32_t kind = 0;  // index into PoolSnapshot::kinds
  std::string device;
  bool healthy = true;
  bool dirty = false;           // a process of no job holds it (DeviceRecord::dirty)
  bool schedulable = true;      // its node is Ready and not drained
  int32_t allocated_milli = 0;  // 1000 = held whole; fractional claims add their share
  uint64_t memory_mib = 0;
  uint64_t memory_used_mib = 0;  // as the agent last reported
  int utilization_percent = -1;  // -1: the backend cannot tell
};

// A quarantined card (docs/reliability.md): which, since when, why. Few, so copied whole.
struct QuarantineSample {
  std::string node, device, reason;
  double since_unix_seconds = 0;
};

struct NodeSample {
  std::string name;
  bool ready = false;
  bool drained = false;
  double seconds_since_heartbeat = 0;
};

struct PoolSnapshot {
  std::vector<NodeSample> nodes;
  std::vector<CardKind> kinds;
  std::vector<DeviceSample> devices;
  std::vector<QuarantineSample> quarantined;
  std::map<std::pair<int, int>, int64_t> jobs;  // (JobState, priority) -> count
};

}  // namespace hetpool::daemon
