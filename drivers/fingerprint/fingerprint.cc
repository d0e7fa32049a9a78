#include "drivers/fingerprint/fingerprint.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hetpool::drivers {
namespace {

using P = Precision;

// NVIDIA's precision set follows compute capability when no spec entry names the card.
std::set<Precision> NvidiaPrecisions(int major, int minor) {
  std::set<Precision> p = {P::kFp32, P::kFp64, P::kFp16, P::kInt8};
  if (major >= 8) p.insert({P::kBf16, P::kTf32, P::kInt4});
  if (major > 8 || (major == 8 && minor >= 9)) p.insert(P::kFp8);
  if (major >= 9) p.erase(P::kInt4);  // Hopper dropped INT4 tensor cores
  return p;
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

void ApplyFingerprint(const SpecTable& specs, DeviceRecord& d) {
  Capability& cap = d.capability;
  const DeviceSpec* spec = specs.Find(d.vendor, d.model);
  if (spec != nullptr) {
    if (d.architecture.empty()) d.architecture = spec->architecture;
    cap.bandwidth_gbps = spec->bandwidth_gbps;
    cap.peak_tflops = spec->peak_tflops;
    cap.precisions = spec->precisions;
    cap.spec_source = absl::StrCat(spec->name, spec->confirmed ? "" : " (unconfirmed figures)");
  }
  switch (d.vendor) {
    case Vendor::kNvidia:
      cap.isa = IsaFamily::kCudaSass;
      cap.collective = "NCCL";
      if (cap.precisions.empty()) cap.precisions = NvidiaPrecisions(cap.arch_major, cap.arch_minor);
      break;
    case Vendor::kMetax:
      cap.isa = IsaFamily::kMaca;
      cap.collective = "MCCL";
      break;
    case Vendor::kCambricon:
      cap.isa = IsaFamily::kBang;
      cap.collective = "CNCL";
      break;
    case Vendor::kIntel:
      cap.isa = IsaFamily::kSpirv;
      cap.collective = "oneCCL";
      break;
    case Vendor::kCpu: break;
  }
  if (cap.precisions.empty()) cap.precisions = {P::kFp32};  // unknown card: claim only what is safe
  cap.torch_device = std::string(RuntimeOf(d.vendor).torch_device);
  cap.dist_backend = std::string(RuntimeOf(d.vendor).dist_backend);
  std::vector<std::string> precisions;
  for (P p : cap.precisions) precisions.emplace_back(PrecisionName(p));
  const std::string canonical =
      absl::StrJoin({std::string(VendorName(d.vendor)), d.model, d.architecture, absl::StrCat(d.memory_mib / 1024),
                     absl::StrJoin(precisions, ","), d.driver_version, cap.runtime_version},
                    "|");
  d.fingerprint = absl::StrFormat("fp-%012x", Fnv1a(canonical) & 0xffffffffffffull);
}

std::string FingerprintLabel(const DeviceRecord& d) {
  std::string model = d.model;
  for (char& c : model) {
    if (c == ' ') c = '-';
  }
  return absl::StrCat(VendorName(d.vendor), " ", model, " ", d.architecture.empty() ? "?" : d.architecture, " ",
                      d.memory_mib / 1024, "GiB");
}

}  // namespace hetpool::drivers
