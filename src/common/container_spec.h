// JobSpec.container (docs/containers.md): which image each vendor's nodes run, checked once at
// submission and read by the scheduler (the vendors a job may land on) and the launch plans
// (the image a node gets).
#pragma once

#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "hetpool/device.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool {

// The image key that stands for every vendor the map does not name.
inline constexpr const char* kAnyVendorImage = "*";

// INVALID_ARGUMENT naming the field: image keys that are no vendor, image names a runtime would
// not take, mounts that are not absolute or reach into /proc, /sys or /dev, a relative workdir,
// or images for none of the vendors the requirements (a role group's included) allow.
absl::Status ValidateContainerSpec(const v1::JobSpec& spec);

// The vendors a job may run on because of its images: nullopt when any vendor may (no image,
// or a "*" image).
std::optional<std::set<Vendor>> ImageVendors(const v1::ContainerSpec& container);

// The image nodes of `vendor` run; "" when the job has no image for it (or no images at all).
std::string ImageFor(const v1::ContainerSpec& container, Vendor vendor);

// "the job names images only for metax, cambricon": why other vendors are ruled out.
std::string ImageVendorsReason(const std::set<Vendor>& vendors);

}  // namespace hetpool
