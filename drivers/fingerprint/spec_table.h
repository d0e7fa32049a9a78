// Headline specs per card model (memory bandwidth, dense peak TFLOPS per precision, supported
// precisions, ISA name), with defaults from ../shared/docs/VENDORS.md. Operators override or add
// entries with a JSON file, since vendor figures are often optimistic or unconfirmed.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetpool/device.h"

namespace hetpool::drivers {

struct DeviceSpec {
  std::string name;  // "H100 SXM"
  Vendor vendor = Vendor::kNvidia;
  std::vector<std::string> match;  // case-insensitive substrings of the reported model name
  std::string architecture;        // used when the backend does not report one (mtp_372, pvc)
  double bandwidth_gbps = 0;
  std::map<Precision, double> peak_tflops;
  std::set<Precision> precisions;  // supported, also where no peak figure is known
  bool confirmed = true;           // false: figures from press material only
};

class SpecTable {
 public:
  static SpecTable Defaults();
  // Entries in the file replace defaults of the same name or are added:
  // [{"name", "vendor", "match": [...], "architecture", "bandwidth_gbps",
  //   "peak_tflops": {"bf16": 989, ...}, "precisions": ["fp32", ...]}]
  absl::Status MergeJson(const std::string& text);
  const DeviceSpec* Find(Vendor vendor, const std::string& model) const;
  const std::vector<DeviceSpec>& entries() const { return entries_; }

 private:
  std::vector<DeviceSpec> entries_;
};

absl::string_view PrecisionName(Precision p);
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
absl::string_view IsaFamilyName(IsaFamily isa);

}  // namespace hetpool::drivers
