// CanRun, one row per rule.
#include "drivers/fingerprint/can_run.h"

#include "drivers/fingerprint/fingerprint.h"
#include "gtest/gtest.h"

namespace hetpool::drivers {
namespace {

using C = Compatibility;
using P = Precision;

DeviceRecord Card(Vendor vendor, std::string model, int major = 0, int minor = 0, std::string driver = "550.54",
                  uint64_t memory = 81920) {
  DeviceRecord d;
  d.vendor = vendor;
  d.model = std::move(model);
  d.memory_mib = memory;
  d.driver_version = std::move(driver);
  d.capability.arch_major = major;
  d.capability.arch_minor = minor;
  if (vendor == Vendor::kNvidia) d.architecture = "sm_" + std::to_string(major) + std::to_string(minor);
  ApplyFingerprint(SpecTable::Defaults(), d);
  return d;
}

struct Row {
  const char* what;
  RunRequirements req;
  DeviceRecord device;
  RunContext node;
  C expect;
  const char* reason_has;
};

TEST(CanRun, Rules) {
  const RunContext all = {{"cuda", "mlu", "xpu", "cpu"}, false};
  const RunContext translation = {{"cuda", "mlu", "xpu", "cpu"}, true};
  const DeviceRecord h100 = Card(Vendor::kNvidia, "NVIDIA H100 80GB HBM3", 9, 0);
  const DeviceRecord a100 = Card(Vendor::kNvidia, "NVIDIA A100 80GB PCIe", 8, 0, "535.104.05");
  const DeviceRecord a10 = Card(Vendor::kNvidia, "NVIDIA A10", 8, 6);
  const DeviceRecord c500 = Card(Vendor::kMetax, "MetaX C500");
  const DeviceRecord mlu = Card(Vendor::kCambricon, "MLU370-X8", 0, 0, "5.10.22", 49152);
  const DeviceRecord pvc = Card(Vendor::kIntel, "Intel(R) Data Center GPU Max 1550", 0, 0, "1.3", 131072);
  auto code = [](CodeArtifacts c) {
    RunRequirements r;
    r.code = std::move(c);
    return r;
  };
  auto needs = [](std::set<P> p, uint64_t mem = 0) {
    RunRequirements r;
    r.precisions = std::move(p);
    r.min_memory_mib = mem;
    return r;
  };
  RunRequirements driver_req;
  driver_req.min_driver_version = "550";
  const Row rows[] = {
      {"pure PyTorch on NVIDIA", {}, h100, all, C::kNative, "PyTorch on cuda"},
      {"pure PyTorch on Cambricon", {}, mlu, all, C::kNative, "PyTorch on mlu"},
      {"pure PyTorch without the torch plugin",
       {},
       mlu,
       RunContext{{"cuda", "cpu"}, false},
       C::kNo,
       "no torch plugin for mlu"},
      {"cubin sm_80 on sm_86 (same major, higher minor)", code({.cuda_sass = {"sm_80"}}), a10, all, C::kNative,
       "cubin sm_80"},
      {"cubin sm_86 on sm_80 (lower minor)", code({.cuda_sass = {"sm_86"}}), a100, all, C::kNo,
       "does not run on sm_80"},
      {"cubin sm_80 on sm_90 (other major)", code({.cuda_sass = {"sm_80"}}), h100, all, C::kNo,
       "does not run on sm_90"},
      {"arch-specific sm_90a on sm_90", code({.cuda_sass = {"sm_90a"}}), h100, all, C::kNative, "sm_90a"},
      {"arch-specific sm_90a elsewhere", code({.cuda_sass = {"sm_90a"}}), a100, all, C::kNo, "sm_90a"},
      {"PTX compute_80 JITs forward to sm_90", code({.cuda_ptx = {"compute_80"}}), h100, all, C::kNative,
       "PTX compute_80 (JIT)"},
      {"PTX compute_90 does not go backward", code({.cuda_ptx = {"compute_90"}}), a100, all, C::kNo, ">= 9.0"},
      {"CUDA kernels on MetaX without translation", code({.cuda_sass = {"sm_80"}}), c500, all, C::kNo, "no build"},
      {"CUDA kernels on MetaX with translation", code({.cuda_sass = {"sm_80"}}), c500, translation, C::kTranslated,
       "translation layer"},
      {"MACA build on MetaX", code({.maca = true}), c500, all, C::kNative, "MACA build"},
      {"CUDA kernels never on Cambricon", code({.cuda_sass = {"sm_80"}, .cuda_ptx = {"compute_80"}}), mlu, translation,
       C::kNo, "no build"},
      {"BANG build for mtp_372", code({.bang = {"mtp_372"}}), mlu, all, C::kNative, "BANG mtp_372"},
      {"BANG build for another MLU", code({.bang = {"mtp_592"}}), mlu, all, C::kNo, "no build"},
      {"SPIR-V on Intel", code({.spirv = true}), pvc, all, C::kNative, "SPIR-V"},
      {"fp8 on H100", needs({P::kFp8}), h100, all, C::kNative, ""},
      {"fp8 on A100", needs({P::kFp8, P::kBf16}), a100, all, C::kNo, "lacks fp8"},
      {"bf16 on MLU370", needs({P::kBf16}), mlu, all, C::kNative, ""},
      {"memory per device", needs({}, 65536), mlu, all, C::kNo, "has 49152 MiB, needs 65536 MiB"},
      {"minimum driver met", driver_req, h100, all, C::kNative, ""},
      {"minimum driver not met", driver_req, a100, all, C::kNo, "driver 535.104.05 < 550"},
      {"best artifact wins", code({.pytorch = true, .cuda_sass = {"sm_70"}}), h100, all, C::kNative, "PyTorch"},
  };
  for (const auto& row : rows) {
    const CanRunResult r = CanRun(row.req, row.device, row.node);
    EXPECT_EQ(r.compatibility, row.expect) << row.what << ": " << r.reason;
    EXPECT_NE(r.reason.find(row.reason_has), std::string::npos) << row.what << ": " << r.reason;
  }
}

TEST(CanRun, VersionsCompareNumerically) {
  EXPECT_LT(CompareVersions("535.104.05", "550.54"), 0);
  EXPECT_GT(CompareVersions("12.10", "12.4"), 0);
  EXPECT_EQ(CompareVersions("12.4", "12.4.0"), 0);
}

TEST(Fingerprint, SameCardsShareAnIdDifferentOnesDoNot) {
  DeviceRecord a = Card(Vendor::kNvidia, "NVIDIA H100 80GB HBM3", 9, 0);
  DeviceRecord b = a;
  b.serial = "different";
  b.uuid = "GPU-other";
  b.pci_bus_id = "0000:99:00.0";
  ApplyFingerprint(SpecTable::Defaults(), b);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.fingerprint.size(), 15u);
  DeviceRecord c = Card(Vendor::kNvidia, "NVIDIA H100 80GB HBM3", 9, 0, "535.1");
  EXPECT_NE(a.fingerprint, c.fingerprint);  // another driver is another class
  EXPECT_EQ(a.capability.bandwidth_gbps, 3350);
  EXPECT_EQ(a.capability.collective, "NCCL");
  EXPECT_EQ(a.capability.torch_device, "cuda");
  EXPECT_EQ(a.capability.dist_backend, "nccl");
  EXPECT_EQ(FingerprintLabel(a), "nvidia NVIDIA-H100-80GB-HBM3 sm_90 80GiB");
}

TEST(SpecTable, OperatorOverridesWin) {
  SpecTable table = SpecTable::Defaults();
  ASSERT_TRUE(table
                  .MergeJson(R"([{"name": "C500", "vendor": "metax", "match": ["C500"],
      "architecture": "xcore1000", "bandwidth_gbps": 1800, "peak_tflops": {"bf16": 280, "fp32": 36}}])")
                  .ok());
  DeviceRecord d;
  d.vendor = Vendor::kMetax;
  d.model = "MetaX C500";
  ApplyFingerprint(table, d);
  EXPECT_EQ(d.capability.bandwidth_gbps, 1800);
  EXPECT_EQ(d.capability.peak_tflops.at(P::kBf16), 280);
  EXPECT_FALSE(table.MergeJson(R"([{"name": "X", "vendor": "amd"}])").ok());
  EXPECT_FALSE(table.MergeJson(R"([{"name": "X", "vendor": "nvidia", "peak_tflops": {"fp7": 1}}])").ok());
  EXPECT_FALSE(table.MergeJson("{}").ok());
}

}  // namespace
}  // namespace hetpool::drivers
