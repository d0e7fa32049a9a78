#include "tests/fakes/fake_fixture.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

#include "nlohmann/json.hpp"

namespace hetpool::fakes {
namespace {

// Test scaffolding: one process-wide fixture per fake library, guarded by a mutex.
std::mutex g_mu;
std::unique_ptr<FakeFixture> g_fixture;
// Fixtures replaced by a reload stay alive: another thread of the process (an NVML event
// waiter beside a discovery) may still read the one it was handed.
std::vector<std::unique_ptr<FakeFixture>> g_replaced;
std::string g_loaded_path;
// What the loaded file was: its mtime alone misses a rewrite within one timestamp tick (the
// kernel stamps files at its coarse clock, a few ms), so its inode and size count too.
struct FileStamp {
  int64_t mtime_ns = 0, size = -1;
  uint64_t inode = 0;
  bool operator==(const FileStamp&) const = default;
};
FileStamp g_loaded_stamp;

FileStamp StampOf(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return {};
  return {int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec, st.st_size, st.st_ino};
}
bool g_loaded = false;
int g_fail_skip = 0;
int g_fail_calls = 0;
int g_fail_error = 0;

std::unique_ptr<FakeFixture> Load() {
  const char* path = std::getenv("HETPOOL_FAKE_FIXTURE");
  if (path == nullptr) return nullptr;
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return nullptr;
  auto fixture = std::make_unique<FakeFixture>();
  fixture->vendor = j.value("vendor", "");
  fixture->driver_version = j.value("driver_version", "");
  fixture->runtime_version = j.value("runtime_version", "");
  for (const auto& d : j.value("devices", nlohmann::json::array())) {
    FakeDevice dev;
    dev.name = d.value("name", "");
    dev.uuid = d.value("uuid", "");
    dev.serial = d.value("serial", "");
    dev.pci_bus_id = d.value("pci_bus_id", "");
    dev.numa_node = d.value("numa_node", -1);
    dev.memory_mib = d.value("memory_mib", 0ull);
    dev.memory_used_mib = d.value("memory_used_mib", 0ull);
    dev.utilization = d.value("utilization", 0);
    auto arch = d.value("arch", std::vector<int>{0, 0});
    dev.arch_major = arch.size() > 0 ? arch[0] : 0;
    dev.arch_minor = arch.size() > 1 ? arch[1] : 0;
    dev.isa = d.value("isa", "");
    dev.pcie_switch = d.value("pcie_switch", "");
    dev.host_bridge = d.value("host_bridge", "");
    dev.socket = d.value("socket", 0);
    dev.removed = d.value("removed", false);
    for (const auto& l : d.value("links", nlohmann::json::array())) {
      dev.links.push_back({l.value("peer", -1), l.value("switch", ""), l.value("lanes", 1)});
    }
    for (const auto& p : d.value("processes", nlohmann::json::array())) {
      dev.processes.emplace_back(p.value("pid", 0), p.value("used_memory_mib", 0ull));
    }
    dev.xid_events = d.value("xid_events", std::vector<int>{});
    dev.ecc_uncorrected_volatile = d.value("ecc_uncorrected_volatile", 0ull);
    dev.rows_remap_pending = d.value("rows_remap_pending", false);
    dev.rows_remap_failed = d.value("rows_remap_failed", false);
    dev.retired_pages_pending = d.value("retired_pages_pending", false);
    dev.retired_pages_failed = d.value("retired_pages_failed", false);
    dev.retired_pages = d.value("retired_pages", 0ull);
    dev.problem = d.value("problem", "");
    dev.memory_health = d.value("memory_health", "ok");
    dev.pcie_width = d.value("pcie_width", 16);
    dev.pcie_max_width = d.value("pcie_max_width", 16);
    dev.pcie_generation = d.value("pcie_generation", 5);
    dev.pcie_max_generation = d.value("pcie_max_generation", 5);
    dev.clock_reasons = d.value("clock_reasons", 0ull);
    dev.nvlink_recoveries = d.value("nvlink_recoveries", 0ull);
    fixture->devices.push_back(std::move(dev));
  }
  return fixture;
}

}  // namespace

FakeFixture* Fixture() {
  std::lock_guard<std::mutex> lock(g_mu);
  // Reload when the test points the variable at another fixture or rewrites the file (how a
  // test reaches a fake inside another process, e.g. to hot-remove a card under an agent).
  const char* path = std::getenv("HETPOOL_FAKE_FIXTURE");
  const std::string current = path ? path : "";
  const FileStamp stamp = StampOf(current);
  if (!g_loaded || current != g_loaded_path || !(stamp == g_loaded_stamp)) {
    if (g_fixture != nullptr) g_replaced.push_back(std::move(g_fixture));
    g_fixture = Load();
    g_loaded = true;
    g_loaded_path = current;
    g_loaded_stamp = stamp;
  }
  return g_fixture.get();
}

FakeFixture* FixtureFor(const char* vendor) {
  FakeFixture* f = Fixture();
  return f != nullptr && f->vendor == vendor ? f : nullptr;
}

std::vector<int> VisibleDevices() {
  std::vector<int> out;
  FakeFixture* f = Fixture();
  if (f == nullptr) return out;
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < f->devices.size(); ++i) {
    if (!f->devices[i].removed) out.push_back(static_cast<int>(i));
  }
  return out;
}

int TakeInjectedError() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fail_calls <= 0) return 0;
  if (g_fail_skip > 0) {
    --g_fail_skip;
    return 0;
  }
  --g_fail_calls;
  return g_fail_error;
}

int PcieDistance(const FakeDevice& a, const FakeDevice& b) {
  if (!a.pcie_switch.empty() && a.pcie_switch == b.pcie_switch) return 1;
  if (!a.host_bridge.empty() && a.host_bridge == b.host_bridge) return 2;
  if (a.socket == b.socket) return 3;
  return 4;
}

bool CopyString(const std::string& text, char* out, unsigned size) {
  if (out == nullptr || text.size() + 1 > size) return false;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return true;
}

}  // namespace hetpool::fakes

extern "C" {

void hetpool_fake_fail_calls(int skip, int calls, int error) {
  std::lock_guard<std::mutex> lock(hetpool::fakes::g_mu);
  hetpool::fakes::g_fail_skip = skip;
  hetpool::fakes::g_fail_calls = calls;
  hetpool::fakes::g_fail_error = error;
}

void hetpool_fake_remove_device(int index) {
  hetpool::fakes::FakeFixture* f = hetpool::fakes::Fixture();
  std::lock_guard<std::mutex> lock(hetpool::fakes::g_mu);
  if (f != nullptr && index >= 0 && index < static_cast<int>(f->devices.size())) f->devices[index].removed = true;
}

void hetpool_fake_reset(void) {
  hetpool::fakes::FakeFixture* f = hetpool::fakes::Fixture();
  std::lock_guard<std::mutex> lock(hetpool::fakes::g_mu);
  hetpool::fakes::g_fail_calls = 0;
  hetpool::fakes::g_fail_skip = 0;
  if (f != nullptr) {
    for (auto& d : f->devices) d.removed = false;
  }
}

}  // extern "C"
