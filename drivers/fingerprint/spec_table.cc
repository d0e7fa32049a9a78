#include "drivers/fingerprint/spec_table.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace hetpool::drivers {
namespace {

using P = Precision;

constexpr std::array<std::pair<Precision, absl::string_view>, 8> kPrecisionNames = {{
    {P::kFp64, "fp64"},
    {P::kFp32, "fp32"},
    {P::kTf32, "tf32"},
    {P::kBf16, "bf16"},
    {P::kFp16, "fp16"},
    {P::kFp8, "fp8"},
    {P::kInt8, "int8"},
    {P::kInt4, "int4"},
}};

std::set<Precision> KeysOf(const std::map<Precision, double>& m) {
  std::set<Precision> out;
  for (const auto& [p, v] : m) out.insert(p);
  return out;
}

DeviceSpec Spec(std::string name, Vendor vendor, std::vector<std::string> match, std::string arch, double bw,
                std::map<Precision, double> tflops, std::set<Precision> extra = {}, bool confirmed = true) {
  DeviceSpec s{std::move(name), vendor, std::move(match), std::move(arch), bw, std::move(tflops), {}, confirmed};
  s.precisions = KeysOf(s.peak_tflops);
  s.precisions.insert(extra.begin(), extra.end());
  return s;
}

}  // namespace

absl::string_view PrecisionName(Precision p) {
  for (const auto& [q, name] : kPrecisionNames) {
    if (q == p) return name;
  }
  return "?";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const auto& [p, n] : kPrecisionNames) {
    if (n == lower) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown precision '", name, "' (fp64, fp32, tf32, bf16, fp16, fp8, int8, int4)"));
}

absl::string_view IsaFamilyName(IsaFamily isa) {
  switch (isa) {
    case IsaFamily::kCudaSass: return "cuda";
    case IsaFamily::kMaca: return "maca";
    case IsaFamily::kBang: return "bang";
    case IsaFamily::kSpirv: return "spirv";
    case IsaFamily::kNone: break;
  }
  return "none";
}

SpecTable SpecTable::Defaults() {
  SpecTable t;
  // Dense peaks (TFLOPS) from VENDORS.md; FP64 is the tensor-core figure where one exists.
  const std::map<Precision, double> hopper = {{P::kFp64, 67},  {P::kFp32, 67},  {P::kTf32, 495}, {P::kBf16, 989},
                                              {P::kFp16, 989}, {P::kFp8, 1979}, {P::kInt8, 1979}};
  t.entries_ = {
      Spec("H200 SXM", Vendor::kNvidia, {"H200"}, "sm_90", 4800, hopper),
      Spec("H100 SXM", Vendor::kNvidia, {"H100"}, "sm_90", 3350, hopper),
      Spec("A100 80G", Vendor::kNvidia, {"A100"}, "sm_80", 2039,
           {{P::kFp64, 19.5}, {P::kFp32, 19.5}, {P::kTf32, 156}, {P::kBf16, 312}, {P::kFp16, 312}, {P::kInt8, 624}},
           {P::kInt4}),
      Spec("MLU370-X8", Vendor::kCambricon, {"MLU370"}, "mtp_372", 614,
           {{P::kFp32, 32}, {P::kBf16, 96}, {P::kFp16, 96}, {P::kInt8, 256}}),
      Spec("MLU590", Vendor::kCambricon, {"MLU590"}, "mtp_592", 0, {}, {P::kFp32, P::kBf16, P::kFp16, P::kInt8},
           /*confirmed=*/false),
      Spec("Max 1550", Vendor::kIntel, {"Max 1550", "1550"}, "pvc", 3277,
           {{P::kFp64, 17}, {P::kFp32, 23}, {P::kTf32, 110}, {P::kBf16, 263}, {P::kFp16, 263}, {P::kInt8, 577}}),
      // The C500 OAM's figures as Gitee AI's documentation quotes MetaX's official data (VENDORS.md,
      // docs/fingerprints.md): FP32 36 with the matrix units (18 on the vector units), TF32 140,
      // BF16 and FP16 280, INT8 560 TOPS; no FP8, so an FP8 job is refused, never estimated. The
      // memory bandwidth is not published: 0 (unknown) until a spec table gives one.
      Spec("C500", Vendor::kMetax, {"C500"}, "xcore1000", 0,
           {{P::kFp32, 36}, {P::kTf32, 140}, {P::kBf16, 280}, {P::kFp16, 280}, {P::kInt8, 560}}, {P::kFp64},
           /*confirmed=*/false),
  };
  return t;
}

absl::Status SpecTable::MergeJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return absl::InvalidArgumentError("spec table: expected a JSON array");
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string where = absl::StrCat("spec table[", i, "]");
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".name: required"));
    }
    DeviceSpec spec;
    spec.name = e["name"].get<std::string>();
    auto vendor = ParseVendor(e.value("vendor", ""));
    if (!vendor) return absl::InvalidArgumentError(absl::StrCat(where, ".vendor: unknown vendor"));
    spec.vendor = *vendor;
    if (e.contains("match") && e["match"].is_array()) {
      for (const auto& m : e["match"]) {
        if (m.is_string()) spec.match.push_back(m.get<std::string>());
      }
    }
    if (spec.match.empty()) spec.match.push_back(spec.name);
    spec.architecture = e.value("architecture", "");
    spec.bandwidth_gbps = e.value("bandwidth_gbps", 0.0);
    spec.confirmed = e.value("confirmed", true);
    if (e.contains("peak_tflops")) {
      if (!e["peak_tflops"].is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ".peak_tflops: object"));
      for (const auto& [k, v] : e["peak_tflops"].items()) {
        auto p = ParsePrecision(k);
        if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".peak_tflops: ", p.status().message()));
        if (!v.is_number()) return absl::InvalidArgumentError(absl::StrCat(where, ".peak_tflops.", k, ": number"));
        spec.peak_tflops[*p] = v.get<double>();
        spec.precisions.insert(*p);
      }
    }
    if (e.contains("precisions") && e["precisions"].is_array()) {
      for (const auto& pv : e["precisions"]) {
        auto p = ParsePrecision(pv.is_string() ? pv.get<std::string>() : "");
        if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".precisions: ", p.status().message()));
        spec.precisions.insert(*p);
      }
    }
    bool replaced = false;
    for (auto& existing : entries_) {
      if (existing.name == spec.name) {
        existing = spec;
        replaced = true;
      }
    }
    // Operator entries go first so they win over a default that matches the same model.
    if (!replaced) entries_.insert(entries_.begin(), spec);
  }
  return absl::OkStatus();
}

const DeviceSpec* SpecTable::Find(Vendor vendor, const std::string& model) const {
  const std::string lower = absl::AsciiStrToLower(model);
  for (const auto& spec : entries_) {
    if (spec.vendor != vendor) continue;
    for (const auto& m : spec.match) {
      if (absl::StrContains(lower, absl::AsciiStrToLower(m))) return &spec;
    }
  }
  return nullptr;
}

}  // namespace hetpool::drivers
