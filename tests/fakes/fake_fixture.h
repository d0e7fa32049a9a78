// Shared state of the fake vendor libraries (real .so files exporting each vendor's C ABI). Their
// devices, links and faults come from the JSON fixture named by HETPOOL_FAKE_FIXTURE; the control
// exports below inject errors and hot-remove devices so tests exercise the real dlopen path.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hetpool::fakes {

struct FakeLink {
  int peer = -1;          // fixture index of the peer device, or -1 when the lane ends at a switch
  std::string switch_id;  // NVSwitch PCI bus id for switch-attached lanes
  int lanes = 1;
};

struct FakeDevice {
  std::string name, uuid, serial, pci_bus_id;
  int numa_node = -1;
  uint64_t memory_mib = 0, memory_used_mib = 0;
  int utilization = 0;
  int arch_major = 0, arch_minor = 0;
  std::string isa;  // vendor ISA string where the library reports one
  std::string pcie_switch, host_bridge;
  int socket = 0;
  std::vector<FakeLink> links;
  bool removed = false;
  // Processes holding the card: (pid, MiB); a test rewrites the fixture to change them.
  std::vector<std::pair<int, uint64_t>> processes;
  // Health, as a test writes it into the fixture: each Xid of `xid_events` is delivered once, in
  // order, to an event set the card is registered with; the counters are read as they stand.
  // The rest each fake reads through its own vendor's calls (NVML, CNDev, MXSML, Level Zero).
  std::vector<int> xid_events;  // NVML only
  uint64_t ecc_uncorrected_volatile = 0;
  bool rows_remap_pending = false, rows_remap_failed = false;
  bool retired_pages_pending = false, retired_pages_failed = false;
  uint64_t retired_pages = 0;
  // The card says it is in trouble in its own words: CNDev's health state "in problem", MXSML's
  // unavailable reason, Level Zero's reset required (wedged). "" when it is well.
  std::string problem;
  std::string memory_health = "ok";  // Level Zero: ok, degraded, critical, replace
  int pcie_width = 16, pcie_max_width = 16, pcie_generation = 5, pcie_max_generation = 5;
  uint64_t clock_reasons = 0;      // NVML's throttle reason bits
  uint64_t nvlink_recoveries = 0;  // NVML: recovery errors, counted on the card's first link
};

struct FakeFixture {
  std::string vendor;  // which fake serves it; the others fail init as if their driver were absent
  std::string driver_version, runtime_version;
  std::vector<FakeDevice> devices;
};

// The fixture, loaded on first use; nullptr when HETPOOL_FAKE_FIXTURE is unset or unreadable
// (the fake's init then fails the way a missing driver would).
FakeFixture* Fixture();
// The fixture if it is for `vendor`, else nullptr (used by each fake's init).
FakeFixture* FixtureFor(const char* vendor);
// Fixture indices of devices still on the bus, in enumeration order.
std::vector<int> VisibleDevices();
// The vendor error to return for this call, 0 when no error is injected.
int TakeInjectedError();
// 1 same PCIe switch, 2 same host bridge, 3 same socket (NUMA domain), 4 across sockets.
int PcieDistance(const FakeDevice& a, const FakeDevice& b);
// Copies `text` into a C buffer of `size` bytes; false when it does not fit.
bool CopyString(const std::string& text, char* out, unsigned size);

}  // namespace hetpool::fakes

extern "C" {
// After `skip` more vendor calls succeed, make the next `calls` fail with the vendor error `error`.
__attribute__((visibility("default"))) void hetpool_fake_fail_calls(int skip, int calls, int error);
// The device at fixture index `index` falls off the bus: enumeration no longer lists it.
__attribute__((visibility("default"))) void hetpool_fake_remove_device(int index);
// Clears injected errors and removals.
__attribute__((visibility("default"))) void hetpool_fake_reset(void);
}
