// Plain value types for a node's devices, shared by drivers/, scheduler/ and src/.
// The libraries know nothing of protobuf; src/common/convert.h maps these to the API messages.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hetpool/vendor.h"

namespace hetpool {

enum class LinkKind {
  kNvLink,
  kMetaxLink,
  kMluLink,
  kXeLink,  // vendor fabrics
  kPcieSwitch,
  kPcieHostBridge,
  kSameNuma,
  kCrossSocket,  // PCIe relationships
};

struct Link {
  std::string peer_device_id;
  LinkKind kind = LinkKind::kCrossSocket;
  int count = 1;
};

// Numeric formats a device computes in; "supported" means the hardware has a fast path for it.
enum class Precision { kFp64, kFp32, kTf32, kBf16, kFp16, kFp8, kInt8, kInt4 };

// Which kind of compiled device code a device executes natively.
enum class IsaFamily { kNone, kCudaSass, kMaca, kBang, kSpirv };

// The canonical description of what a device can run, derived from the vendor library's answers
// and the spec table (drivers/fingerprint). Devices with equal records share a fingerprint id.
struct Capability {
  IsaFamily isa = IsaFamily::kNone;
  int arch_major = 0;  // NVIDIA compute capability X.Y; other vendors' numeric arch when known
  int arch_minor = 0;
  std::set<Precision> precisions;
  double bandwidth_gbps = 0;                // memory bandwidth, GB/s (0 = unknown)
  std::map<Precision, double> peak_tflops;  // dense peak per precision (absent = unknown)
  std::string runtime_version;              // CUDA driver API, MACA, Neuware, Level Zero
  std::string collective;                   // NCCL, MCCL, CNCL, oneCCL
  std::string torch_device;                 // cuda, mlu, xpu
  std::string dist_backend;                 // nccl, cncl, xccl
  std::string spec_source;                  // which spec-table entry filled the figures
};

// A process the vendor library says holds memory on a card (NVML's compute processes).
struct CardProcess {
  int pid = 0;
  uint64_t memory_mib = 0;  // 0 when the library cannot tell
  std::string owner;        // filled by the agent: "job-000007 g1", "" for none of its jobs
};

// What a vendor library says of a card's health beyond "it answers" (issue 61): an Xid event,
// an error counter, a pending reset. Fatal: the card takes no work until it is reset and an
// operator returns it. Degraded: placed last, and named on the jobs that run there. Noted: said.
enum class Severity { kNoted = 0, kDegraded = 1, kFatal = 2 };
struct HealthSignal {
  Severity severity = Severity::kNoted;
  std::string what;    // "Xid 79: GPU has fallen off the bus"
  std::string source;  // "nvml"
};

struct DeviceRecord {
  std::string id;  // node-local: "<vendor><index>"
  int index = 0;   // vendor enumeration index, used in visibility variables
  Vendor vendor = Vendor::kNvidia;
  std::string model;
  std::string uuid;
  std::string pci_bus_id;
  int numa_node = -1;
  std::string local_cpus;  // CPUs near the device (sysfs local_cpulist)
  // The card's own device files (/dev/nvidia3, /dev/dri/renderD129); a confined job is denied
  // those of the cards it was not given.
  std::vector<std::string> device_nodes;
  uint64_t memory_mib = 0;
  uint64_t memory_used_mib = 0;
  bool healthy = true;
  std::string health_message;
  std::string architecture;
  std::string driver_version;
  std::string serial;
  int utilization_percent = -1;  // -1 when the backend cannot tell
  std::vector<Link> links;
  Capability capability;
  std::string fingerprint;  // short stable id of (vendor, model, arch, memory, precisions, versions)
  // Who holds the card now, where the vendor library can tell (empty otherwise).
  std::vector<CardProcess> processes;
  // Non-empty when a process that belongs to none of the node's jobs holds the card, in words
  // ("pid 4242 (uid 0, python3) holds 2,658 MiB"): the agent says so, and the scheduler places
  // nothing on the card until it is gone.
  std::string dirty;
  // The health signals the vendor library raised on the card since the agent started (latched: a
  // card that once raised a fatal one stays unhealthy until it is reset, and the agent with it).
  std::vector<HealthSignal> signals;

  // Whether the scheduler may give the card to a job.
  bool Placeable() const { return healthy && dirty.empty(); }
  // A degraded signal (throttled, its link narrowed, a repair waiting for a reset): it runs
  // jobs, after every card that is well, and the jobs on it say so.
  bool Degraded() const {
    for (const HealthSignal& s : signals) {
      if (s.severity == Severity::kDegraded) return true;
    }
    return false;
  }
};

struct NodeInventory {
  std::string hostname;
  int cpus = 0;
  uint64_t memory_mib = 0;
  std::vector<DeviceRecord> devices;
  std::string backend;
  bool simulated = false;
  std::set<std::string> torch_devices;  // torch plugins the node can run: cuda, mlu, xpu, cpu
  std::set<std::string> collectives;    // collective libraries across vendors found: flagcx
  // The OCI runtime for jobs in images ("" = none) and the images it holds locally.
  std::string container_runtime;
  std::string container_runtime_version;
  std::set<std::string> images;
};

}  // namespace hetpool
