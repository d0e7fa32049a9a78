#include "src/common/container_spec.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/common/names.h"

namespace hetpool {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// Lexically normal and absolute: no "..", ".", "//" or trailing "/" (the runtime would read the
// same path another way than this check did).
bool IsPlainAbsolutePath(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.size() > 4096) return false;
  if (path == "/") return true;
  if (path.back() == '/' || absl::StrContains(path, "//")) return false;
  for (absl::string_view part : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    if (part == "." || part == "..") return false;
  }
  return path.find_first_of(",:\n") == std::string::npos;  // the runtime's -v separators
}

// The kernel's views and the device nodes are the runtime's to give (exactly the job's cards).
bool ReachesKernelViews(const std::string& target) {
  for (const char* top : {"/proc", "/sys", "/dev"}) {
    if (target == top || absl::StartsWith(target, absl::StrCat(top, "/"))) return true;
  }
  return target == "/";
}

absl::Status CheckAllowedVendors(absl::string_view where, const v1::DeviceRequirements& requirements,
                                 const std::set<Vendor>& imaged) {
  if (requirements.vendors_size() == 0) return absl::OkStatus();
  for (const auto& name : requirements.vendors()) {
    if (auto vendor = ParseVendor(name); vendor && imaged.contains(*vendor)) return absl::OkStatus();
  }
  return Invalid("container.images",
                 absl::StrCat("no image for any vendor ", where, ".vendors allows (",
                              absl::StrJoin(requirements.vendors(), ", "), "); ", ImageVendorsReason(imaged)));
}

}  // namespace

absl::Status ValidateContainerSpec(const v1::JobSpec& spec) {
  if (!spec.has_container()) return absl::OkStatus();
  const v1::ContainerSpec& c = spec.container();
  if (c.images().empty())
    return Invalid("container.images", "required: an image for every vendor (\"*\") or per vendor");
  if (c.images_size() > 8) return Invalid("container.images", "more than 8 entries");
  for (const auto& [key, image] : c.images()) {
    const std::string field = absl::StrCat("container.images[", key, "]");
    if (key != kAnyVendorImage && !ParseVendor(key)) {
      return Invalid(field, "not a vendor (nvidia, metax, cambricon, intel, cpu) or \"*\"");
    }
    if (auto s = CheckImageReference(field, image); !s.ok()) return s;
  }
  if (c.mounts_size() > 32) return Invalid("container.mounts", "more than 32 mounts");
  std::set<std::string> targets;
  for (int i = 0; i < c.mounts_size(); ++i) {
    const v1::ContainerMount& m = c.mounts(i);
    const std::string field = absl::StrCat("container.mounts[", i, "]");
    if (!IsPlainAbsolutePath(m.source())) {
      return Invalid(absl::StrCat(field, ".source"), "an absolute path without '.', '..', '//', ',' or ':' parts");
    }
    const std::string target = m.target().empty() ? m.source() : m.target();
    if (!IsPlainAbsolutePath(target)) {
      return Invalid(absl::StrCat(field, ".target"), "an absolute path without '.', '..', '//', ',' or ':' parts");
    }
    if (ReachesKernelViews(target)) {
      return Invalid(absl::StrCat(field, ".target"), "may not be /, /proc, /sys or /dev (the runtime sets those up)");
    }
    if (!targets.insert(target).second) return Invalid(absl::StrCat(field, ".target"), "mounted twice");
  }
  if (!c.workdir().empty() && !IsPlainAbsolutePath(c.workdir())) {
    return Invalid("container.workdir", "an absolute path without '.', '..' or '//' parts");
  }
  const bool cpu_job = spec.devices_per_node() == 0 && spec.groups_size() == 0 && !spec.mixed_vendors();
  if (cpu_job && ImageFor(c, Vendor::kCpu).empty()) {
    return Invalid("container.images", "a CPU job (devices_per_node 0) needs an image for \"cpu\" or \"*\"");
  }
  const auto imaged = ImageVendors(c);
  if (!imaged) return absl::OkStatus();
  if (auto s = CheckAllowedVendors("requirements", spec.requirements(), *imaged); !s.ok()) return s;
  for (int i = 0; i < spec.groups_size(); ++i) {
    if (auto s =
            CheckAllowedVendors(absl::StrCat("groups[", i, "].requirements"), spec.groups(i).requirements(), *imaged);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::optional<std::set<Vendor>> ImageVendors(const v1::ContainerSpec& container) {
  if (container.images().empty() || container.images().contains(kAnyVendorImage)) return std::nullopt;
  std::set<Vendor> out;
  for (const auto& [key, image] : container.images()) {
    if (auto vendor = ParseVendor(key)) out.insert(*vendor);
  }
  return out;
}

std::string ImageFor(const v1::ContainerSpec& container, Vendor vendor) {
  if (auto it = container.images().find(std::string(VendorName(vendor))); it != container.images().end())
    return it->second;
  if (auto it = container.images().find(kAnyVendorImage); it != container.images().end()) return it->second;
  return "";
}

std::string ImageVendorsReason(const std::set<Vendor>& vendors) {
  std::vector<std::string> names;
  for (Vendor v : vendors) names.emplace_back(VendorName(v));
  return absl::StrCat("the job names images only for ", absl::StrJoin(names, ", "));
}

}  // namespace hetpool
