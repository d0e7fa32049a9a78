// The PCIe tree as Linux shows it under /sys/bus/pci/devices: which cards share a PCIe switch or
// a host bridge, their NUMA node and local CPUs, and pci.ids names. Used to complete what a vendor
// library does not say, and as the `sysfs` backend that lists accelerators by PCI class alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "drivers/device_backend.h"

namespace hetpool::drivers {

struct PciLocation {
  std::string bus_id;  // canonical
  int numa_node = -1;
  std::string local_cpus;         // local_cpulist, e.g. "0-31,64-95"
  std::vector<std::string> path;  // from the root complex (pci0000:16) down to the device itself
  unsigned vendor_id = 0, device_id = 0, class_code = 0;
};

class SysfsPci {
 public:
  // `sysfs_root` is "/sys" on a real machine; tests build a tree elsewhere.
  explicit SysfsPci(std::string sysfs_root = "/sys", std::string pci_ids_path = "");

  std::optional<PciLocation> Locate(const std::string& bus_id) const;
  // PCIe relationship of two devices (never a fabric kind).
  static LinkKind Relationship(const PciLocation& a, const PciLocation& b);
  // Accelerator-class devices (3D controller, display "other", processing accelerator) of known
  // vendors. VGA controllers (class 0x0300) are left out: on most servers that is the BMC's.
  std::vector<PciLocation> Accelerators() const;
  // "NVIDIA Corporation GH100 [H100 SXM5 80GB]" style names from pci.ids, empty when unknown.
  std::string DeviceName(unsigned vendor_id, unsigned device_id) const;

  // Fills numa_node where unknown and the PCIe relationship for every pair of devices that has
  // no link yet. Devices whose bus id sysfs does not know are left as they are.
  void Complete(std::vector<DeviceRecord>& devices) const;

 private:
  std::string root_;
  std::string pci_ids_;
};

class SysfsBackend : public DeviceBackend {
 public:
  explicit SysfsBackend(SysfsPci pci) : pci_(std::move(pci)) {}
  absl::string_view Name() const override { return "sysfs"; }
  bool Simulated() const override { return false; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override;

 private:
  SysfsPci pci_;
};

// Vendor of a PCI vendor id, if hetpool knows it as an accelerator vendor.
std::optional<Vendor> VendorOfPciId(unsigned vendor_id);

}  // namespace hetpool::drivers
