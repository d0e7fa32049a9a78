#include "drivers/health_signals.h"

#include "absl/strings/str_cat.h"

namespace hetpool::drivers {

std::vector<HealthSignal> SignalsOfMemory(const MemoryHealth& m, absl::string_view source) {
  std::vector<HealthSignal> out;
  auto add = [&](Severity severity, std::string what) {
    out.push_back({severity, std::move(what), std::string(source)});
  };
  if (m.uncorrected_errors.value_or(0) > 0) {
    add(Severity::kFatal, absl::StrCat(*m.uncorrected_errors, " uncorrected ECC error(s) since the driver loaded"));
  }
  if (m.rows_remap_failed.value_or(false)) {
    add(Severity::kFatal, "row remapping failed (no spare rows left)");
  } else if (m.rows_remap_pending.value_or(false)) {
    add(Severity::kDegraded, "row remapping pending: the card needs a reset");
  }
  if (m.retired_pages_failed.value_or(false)) {
    add(Severity::kFatal, "page retirement failed");
  } else if (m.retired_pages_pending.value_or(false)) {
    add(Severity::kDegraded, "retired pages pending: the card needs a reset");
  }
  if (m.retired_pages.value_or(0) > 0) add(Severity::kNoted, absl::StrCat(*m.retired_pages, " page(s) retired"));
  return out;
}

std::optional<HealthSignal> SignalOfPcieLink(const PcieLinkHealth& link, absl::string_view source) {
  if (link.width > 0 && link.max_width > 0 && link.width < link.max_width) {
    return HealthSignal{Severity::kDegraded,
                        absl::StrCat("PCIe link x", link.width, " of x", link.max_width, " (Gen", link.generation,
                                     " of Gen", link.max_generation, ")"),
                        std::string(source)};
  }
  return std::nullopt;
}

void MarkUnhealthyOnFatal(DeviceRecord& d) {
  for (const HealthSignal& s : d.signals) {
    if (s.severity != Severity::kFatal || !d.healthy) continue;
    d.healthy = false;
    d.health_message = absl::StrCat("fatal: ", s.what);
  }
}

}  // namespace hetpool::drivers
