#include "drivers/fingerprint/can_run.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "drivers/fingerprint/spec_table.h"

namespace hetpool::drivers {
namespace {

struct Target {
  int major = 0, minor = 0;
  bool arch_specific = false;
};

// "sm_90a" / "compute_80" -> {9, 0, true} / {8, 0, false}; nullopt when malformed.
std::optional<Target> ParseCudaTarget(const std::string& text, absl::string_view prefix) {
  if (!absl::StartsWith(text, prefix)) return std::nullopt;
  std::string digits = text.substr(prefix.size());
  Target t;
  if (!digits.empty() && digits.back() == 'a') {
    t.arch_specific = true;
    digits.pop_back();
  }
  int value = 0;
  if (digits.size() < 2 || !absl::SimpleAtoi(digits, &value)) return std::nullopt;
  t.major = value / 10;
  t.minor = value % 10;
  return t;
}

absl::string_view TorchDeviceOf(Vendor v) { return RuntimeOf(v).torch_device; }

}  // namespace

int CompareVersions(const std::string& a, const std::string& b) {
  std::vector<std::string> pa = absl::StrSplit(a, absl::ByAnyChar(".-"), absl::SkipEmpty());
  std::vector<std::string> pb = absl::StrSplit(b, absl::ByAnyChar(".-"), absl::SkipEmpty());
  for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
    long x = 0, y = 0;
    if (i < pa.size()) (void)absl::SimpleAtoi(pa[i], &x);
    if (i < pb.size()) (void)absl::SimpleAtoi(pb[i], &y);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

absl::string_view CompatibilityName(Compatibility c) {
  switch (c) {
    case Compatibility::kNative: return "native";
    case Compatibility::kTranslated: return "via translation";
    case Compatibility::kNo: break;
  }
  return "no";
}

CanRunResult CanRun(const RunRequirements& req, const DeviceRecord& d, const RunContext& node) {
  const std::string who =
      absl::StrCat(VendorName(d.vendor), " ", d.model, d.architecture.empty() ? "" : " ", d.architecture);
  auto no = [&](std::string why) { return CanRunResult{Compatibility::kNo, absl::StrCat(who, ": ", why)}; };

  if (d.memory_mib < req.min_memory_mib) {
    return no(absl::StrCat("has ", d.memory_mib, " MiB, needs ", req.min_memory_mib, " MiB per device"));
  }
  std::vector<std::string> missing;
  for (Precision p : req.precisions) {
    if (!d.capability.precisions.contains(p)) missing.emplace_back(PrecisionName(p));
  }
  if (!missing.empty()) return no(absl::StrCat("lacks ", absl::StrJoin(missing, ", ")));
  if (!req.min_driver_version.empty() && CompareVersions(d.driver_version, req.min_driver_version) < 0) {
    return no(absl::StrCat("driver ", d.driver_version.empty() ? "unknown" : d.driver_version, " < ",
                           req.min_driver_version));
  }
  if (!req.min_runtime_version.empty() && CompareVersions(d.capability.runtime_version, req.min_runtime_version) < 0) {
    return no(absl::StrCat("runtime ", d.capability.runtime_version.empty() ? "unknown" : d.capability.runtime_version,
                           " < ", req.min_runtime_version));
  }

  const CodeArtifacts& code = req.code;
  const bool pytorch = code.pytorch || code.Empty();
  CanRunResult best{Compatibility::kNo, ""};
  std::vector<std::string> why_not;
  auto offer = [&best](Compatibility c, std::string how) {
    if (c > best.compatibility) best = {c, std::move(how)};
  };

  if (pytorch) {
    const std::string torch_device(TorchDeviceOf(d.vendor));
    if (node.torch_devices.contains(torch_device)) {
      offer(Compatibility::kNative, absl::StrCat("PyTorch on ", torch_device));
    } else {
      why_not.push_back(absl::StrCat("the node has no torch plugin for ", torch_device));
    }
  }
  const int cc_major = d.capability.arch_major, cc_minor = d.capability.arch_minor;
  for (const auto& sass : code.cuda_sass) {
    auto t = ParseCudaTarget(sass, "sm_");
    if (!t) continue;
    if (d.vendor == Vendor::kNvidia) {
      const bool ok = t->arch_specific ? (cc_major == t->major && cc_minor == t->minor)
                                       : (cc_major == t->major && cc_minor >= t->minor);
      if (ok) {
        offer(Compatibility::kNative, absl::StrCat("cubin ", sass));
      } else {
        why_not.push_back(absl::StrCat("cubin ", sass, " does not run on sm_", cc_major, cc_minor));
      }
    } else if (d.vendor == Vendor::kMetax && node.metax_cuda_translation) {
      offer(Compatibility::kTranslated, absl::StrCat("cubin ", sass, " through the CUDA translation layer"));
    }
  }
  for (const auto& ptx : code.cuda_ptx) {
    auto t = ParseCudaTarget(ptx, "compute_");
    if (!t) continue;
    if (d.vendor == Vendor::kNvidia) {
      if (cc_major > t->major || (cc_major == t->major && cc_minor >= t->minor)) {
        offer(Compatibility::kNative, absl::StrCat("PTX ", ptx, " (JIT)"));
      } else {
        why_not.push_back(absl::StrCat("PTX ", ptx, " needs compute capability >= ", t->major, ".", t->minor));
      }
    } else if (d.vendor == Vendor::kMetax && node.metax_cuda_translation) {
      offer(Compatibility::kTranslated, absl::StrCat("PTX ", ptx, " through the CUDA translation layer"));
    }
  }
  if (code.maca && d.vendor == Vendor::kMetax) offer(Compatibility::kNative, "MACA build");
  for (const auto& bang : code.bang) {
    if (d.vendor == Vendor::kCambricon && bang == d.architecture) offer(Compatibility::kNative, "BANG " + bang);
  }
  if (code.spirv && d.vendor == Vendor::kIntel) offer(Compatibility::kNative, "SPIR-V build");

  if (best.compatibility != Compatibility::kNo) {
    best.reason = absl::StrCat(who, ": ", CompatibilityName(best.compatibility), " (", best.reason, ")");
    return best;
  }
  if (why_not.empty()) {
    std::vector<std::string> carried;
    if (pytorch) carried.push_back("PyTorch");
    for (const auto& s : code.cuda_sass) carried.push_back(s);
    for (const auto& s : code.cuda_ptx) carried.push_back(s);
    if (code.maca) carried.push_back("MACA");
    for (const auto& s : code.bang) carried.push_back(s);
    if (code.spirv) carried.push_back("SPIR-V");
    why_not.push_back(absl::StrCat("no build for this device among [", absl::StrJoin(carried, ", "), "]"));
  }
  return no(absl::StrJoin(why_not, "; "));
}

}  // namespace hetpool::drivers
