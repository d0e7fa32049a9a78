#include "src/daemon/state/job_request.h"

#include <algorithm>

#include "drivers/fingerprint/fingerprint.h"
#include "drivers/fingerprint/spec_table.h"
#include "src/common/container_spec.h"
#include "src/common/convert.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {

namespace {

// Validated at submission, so parsing cannot fail here.
scheduler::Requirements ToRequirements(const pb::DeviceRequirements& r) {
  scheduler::Requirements out;
  for (const auto& v : r.vendors()) {
    if (auto vendor = ParseVendor(v)) out.vendors.push_back(*vendor);
  }
  out.models.assign(r.models().begin(), r.models().end());
  out.fingerprints.assign(r.fingerprints().begin(), r.fingerprints().end());
  drivers::RunRequirements& run = out.run;
  run.min_memory_mib = r.min_memory_mib();
  run.min_driver_version = r.min_driver_version();
  run.min_runtime_version = r.min_runtime_version();
  for (const auto& p : r.precisions()) {
    if (auto precision = drivers::ParsePrecision(p); precision.ok()) run.precisions.insert(*precision);
  }
  run.code.pytorch = r.code().pytorch();
  run.code.cuda_sass.assign(r.code().cuda_sass().begin(), r.code().cuda_sass().end());
  run.code.cuda_ptx.assign(r.code().cuda_ptx().begin(), r.code().cuda_ptx().end());
  run.code.maca = r.code().maca();
  run.code.bang.assign(r.code().bang().begin(), r.code().bang().end());
  run.code.spirv = r.code().spirv();
  return out;
}

// A job whose images cover only some vendors runs only on those: narrow what the requirements
// allow (validation made sure something is left) and say why.
void NarrowToImageVendors(const std::set<Vendor>& imaged, scheduler::Requirements& requirements) {
  std::vector<Vendor> allowed;
  for (Vendor v : imaged) {
    if (requirements.vendors.empty() ||
        std::find(requirements.vendors.begin(), requirements.vendors.end(), v) != requirements.vendors.end()) {
      allowed.push_back(v);
    }
  }
  requirements.vendors = std::move(allowed);
  requirements.vendors_why = ImageVendorsReason(imaged);
}

}  // namespace

scheduler::PlacementRequest ToPlacementRequest(const pb::JobSpec& spec) {
  scheduler::PlacementRequest req;
  req.nnodes = spec.nnodes();
  req.devices_per_node = spec.devices_per_node();
  req.requirements = ToRequirements(spec.requirements());
  if (spec.device_milli() > 0) req.device_milli = spec.device_milli();
  req.device_memory_mib = spec.device_memory_mib();
  req.cpu_milli = HostCpuMilliPerNode(spec);
  req.host_memory_mib = HostMemoryMibPerNode(spec);
  req.mixed_vendors = spec.mixed_vendors();
  if (spec.collective() == "flagcx") req.collective = "flagcx";
  for (const auto& g : spec.groups()) {
    req.groups.push_back({g.name(), g.nnodes(), g.devices_per_node(), ToRequirements(g.requirements())});
  }
  if (spec.has_container()) {
    req.in_image = true;
    for (Vendor v : {Vendor::kNvidia, Vendor::kMetax, Vendor::kCambricon, Vendor::kIntel, Vendor::kCpu}) {
      if (std::string image = ImageFor(spec.container(), v); !image.empty()) req.images[v] = std::move(image);
    }
    if (const auto imaged = ImageVendors(spec.container())) {
      NarrowToImageVendors(*imaged, req.requirements);
      for (auto& group : req.groups) NarrowToImageVendors(*imaged, group.requirements);
    }
  }
  return req;
}

pb::PendingReason ToProto(const scheduler::PendingReason& r) {
  pb::PendingReason out;
  out.set_never_fits(r.never);
  out.set_needs(r.needs);
  out.set_closest(r.closest);
  for (const auto& [plugin, n] : r.nodes_rejected) (*out.mutable_nodes_rejected())[plugin] = n;
  for (const auto& reason : r.device_reasons) out.add_device_reasons(reason);
  return out;
}

std::vector<int> ElasticSizes(const pb::JobSpec& spec) {
  if (!spec.has_elastic_nnodes()) return {spec.nnodes()};
  std::vector<int> sizes;
  for (int n = spec.elastic_nnodes().max(); n >= spec.elastic_nnodes().min(); --n) sizes.push_back(n);
  return sizes;
}

}  // namespace hetpool::daemon
