#include "drivers/nvml/nvml_health.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hetpool::drivers {

namespace {

struct XidMeaning {
  unsigned long long xid;
  Severity severity;
  const char* what;
};

// NVIDIA's Xid catalog, the Xids a training pool meets. Fatal: the card must be reset (or
// replaced) before it runs work again. Degraded: it runs, but the driver says it is wearing.
constexpr XidMeaning kXids[] = {
    {13, Severity::kNoted, "graphics engine exception (the application's)"},
    {31, Severity::kNoted, "GPU memory page fault (the application's)"},
    {43, Severity::kNoted, "GPU stopped processing (the application's channel)"},
    {45, Severity::kNoted, "preemptive cleanup after earlier errors"},
    {48, Severity::kFatal, "double-bit ECC error"},
    {63, Severity::kDegraded, "ECC page retirement or row remapping recorded"},
    {64, Severity::kFatal, "ECC page retirement or row remapping failed"},
    {68, Severity::kNoted, "video decoder exception (the application's)"},
    {74, Severity::kDegraded, "NVLink error"},
    {79, Severity::kFatal, "GPU has fallen off the bus"},
    {92, Severity::kDegraded, "high single-bit ECC error rate"},
    {94, Severity::kDegraded, "contained ECC error (the application was stopped)"},
    {95, Severity::kFatal, "uncontained ECC error"},
    {109, Severity::kNoted, "context switch timeout (the application's)"},
    {119, Severity::kFatal, "GSP RPC timeout"},
    {120, Severity::kFatal, "GSP error"},
    {140, Severity::kFatal, "unrecovered ECC error"},
};

}  // namespace

HealthSignal SignalOfXid(unsigned long long xid) {
  for (const XidMeaning& m : kXids) {
    if (m.xid == xid) return {m.severity, absl::StrCat("Xid ", xid, ": ", m.what), "nvml"};
  }
  return {Severity::kNoted, absl::StrCat("Xid ", xid, " (not in hetpool's table)"), "nvml"};
}

std::optional<HealthSignal> SignalOfClockReasons(unsigned long long reasons) {
  struct Reason {
    unsigned long long bit;
    const char* what;
  };
  // nvml.h's nvmlClocksThrottleReason* (now nvmlClocksEventReason*) bits.
  constexpr Reason kSlowing[] = {{0x8, "hardware slowdown"},
                                 {0x40, "hardware thermal slowdown"},
                                 {0x80, "hardware power brake"},
                                 {0x20, "software thermal slowdown"}};
  std::vector<std::string> seen;
  for (const Reason& r : kSlowing) {
    if (reasons & r.bit) seen.push_back(r.what);
  }
  if (seen.empty()) return std::nullopt;
  return HealthSignal{Severity::kDegraded, absl::StrCat("clocks held down: ", absl::StrJoin(seen, ", ")), "nvml"};
}

std::optional<HealthSignal> SignalOfNvLinkRecoveries(unsigned long long recoveries,
                                                     const std::vector<std::string>& links) {
  if (recoveries == 0) return std::nullopt;
  return HealthSignal{Severity::kDegraded,
                      absl::StrCat("NVLink: ", recoveries, " recovery error(s) on link(s) ", absl::StrJoin(links, ",")),
                      "nvml"};
}

}  // namespace hetpool::drivers
