// The sysfs PCIe reader against a tree built in a temporary directory: two sockets, a PCIe switch
// with two GPUs, a GPU on its own root port, a card on the other socket, a BMC VGA device.
#include "drivers/sysfs/sysfs_pci.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::drivers {
namespace {
namespace fs = std::filesystem;

class SysfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // devices/pci0000:00/0000:00:01.0 (root port) / 0000:01:00.0 (switch up) / 0000:02:0{0,1}.0 (down) / GPUs
    AddDevice("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0x10de, 0x2330, 0x030200, 0, "0-15");
    AddDevice("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0x10de, 0x2330, 0x030200, 0, "0-15");
    AddDevice("pci0000:00/0000:00:02.0/0000:05:00.0", 0x10de, 0x2330, 0x030200, 0, "0-15");
    AddDevice("pci0000:80/0000:80:01.0/0000:81:00.0", 0xcabc, 0x0370, 0x120000, 1, "16-31");
    AddDevice("pci0000:00/0000:00:1c.0/0000:0a:00.0", 0x1a03, 0x2000, 0x030000, 0, "0-15");  // BMC VGA
    std::ofstream(dir_.path() + "/pci.ids") << "10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n"
                                               "cabc  Cambricon\n\t0370  MLU370\n";
  }

  void AddDevice(const std::string& path, unsigned vendor, unsigned device, unsigned cls, int numa,
                 const std::string& cpus) {
    const fs::path real = fs::path(dir_.path()) / "devices" / path;
    fs::create_directories(real);
    std::ofstream(real / "vendor") << "0x" << std::hex << vendor << "\n";
    std::ofstream(real / "device") << "0x" << std::hex << device << "\n";
    std::ofstream(real / "class") << "0x" << std::hex << cls << "\n";
    std::ofstream(real / "numa_node") << numa << "\n";
    std::ofstream(real / "local_cpulist") << cpus << "\n";
    const fs::path bus_dir = fs::path(dir_.path()) / "bus/pci/devices";
    fs::create_directories(bus_dir);
    fs::create_symlink(real, bus_dir / real.filename());
  }

  testing::TempDir dir_;
};

TEST_F(SysfsTest, RelationshipsFollowThePcieTree) {
  SysfsPci pci(dir_.path(), dir_.path() + "/pci.ids");
  auto a = pci.Locate("0000:03:00.0"), b = pci.Locate("00000000:04:00.0"), c = pci.Locate("0000:05:00.0"),
       d = pci.Locate("0000:81:00.0");
  ASSERT_TRUE(a && b && c && d);
  EXPECT_EQ(a->numa_node, 0);
  EXPECT_EQ(d->local_cpus, "16-31");
  EXPECT_EQ(SysfsPci::Relationship(*a, *b), LinkKind::kPcieSwitch);
  EXPECT_EQ(SysfsPci::Relationship(*a, *c), LinkKind::kPcieHostBridge);
  EXPECT_EQ(SysfsPci::Relationship(*a, *d), LinkKind::kCrossSocket);
  EXPECT_FALSE(pci.Locate("0000:99:00.0").has_value());
}

TEST_F(SysfsTest, BackendListsAcceleratorsOnlyWithNames) {
  SysfsBackend backend{SysfsPci(dir_.path(), dir_.path() + "/pci.ids")};
  auto devices = backend.Discover();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 4u);  // no BMC VGA
  EXPECT_EQ((*devices)[0].id, "nvidia0");
  EXPECT_EQ((*devices)[0].model, "NVIDIA Corporation GH100 [H100 SXM5 80GB]");
  EXPECT_EQ((*devices)[3].vendor, Vendor::kCambricon);
  EXPECT_EQ((*devices)[3].numa_node, 1);
  ASSERT_FALSE((*devices)[0].links.empty());
  EXPECT_EQ((*devices)[0].links[0].kind, LinkKind::kPcieSwitch);
}

TEST_F(SysfsTest, CompleteFillsOnlyWhatIsMissing) {
  std::vector<DeviceRecord> devices(2);
  devices[0].id = "nvidia0";
  devices[0].pci_bus_id = "0000:03:00.0";
  devices[1].id = "nvidia1";
  devices[1].pci_bus_id = "0000:05:00.0";
  devices[1].numa_node = 7;  // the vendor said so: keep it
  devices[0].links.push_back({"nvidia1", LinkKind::kNvLink, 4});
  SysfsPci(dir_.path()).Complete(devices);
  EXPECT_EQ(devices[0].numa_node, 0);
  EXPECT_EQ(devices[1].numa_node, 7);
  ASSERT_EQ(devices[0].links.size(), 1u);  // NVLink kept, no PCIe link added on top
  ASSERT_EQ(devices[1].links.size(), 1u);
  EXPECT_EQ(devices[1].links[0].kind, LinkKind::kPcieHostBridge);
}

}  // namespace
}  // namespace hetpool::drivers
