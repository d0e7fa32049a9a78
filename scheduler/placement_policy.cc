// The helpers every placement decision shares: which cards qualify (cached per fingerprint
// class), how much of a card a request holds, and the content generation of a node view.
#include "scheduler/placement_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hetpool::scheduler {

bool ByPriorityThenSubmission(const QueuedJob& a, const QueuedJob& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.submit_seq < b.submit_seq;
}

drivers::CanRunResult Qualifies(const DeviceRecord& device, const Requirements& req, const drivers::RunContext& node) {
  if (!req.vendors.empty() && std::find(req.vendors.begin(), req.vendors.end(), device.vendor) == req.vendors.end()) {
    return {drivers::Compatibility::kNo,
            absl::StrCat(VendorName(device.vendor), " is not an allowed vendor",
                         req.vendors_why.empty() ? "" : absl::StrCat(" (", req.vendors_why, ")"))};
  }
  if (!req.models.empty() && std::find(req.models.begin(), req.models.end(), device.model) == req.models.end()) {
    return {drivers::Compatibility::kNo, absl::StrCat(device.model, " is not an allowed model")};
  }
  if (!req.fingerprints.empty() &&
      std::find(req.fingerprints.begin(), req.fingerprints.end(), device.fingerprint) == req.fingerprints.end()) {
    return {drivers::Compatibility::kNo,
            absl::StrCat(device.model, " (", device.fingerprint, ") is not an allowed class")};
  }
  return drivers::CanRun(req.run, device, node);
}

void QualifyCache::SetNode(const drivers::RunContext& node) {
  // Neighbouring nodes nearly always share a context: compare with the last one before building
  // a signature (this runs for every node of every decision).
  const bool same = node_ != nullptr && current_ != nullptr &&
                    node.metax_cuda_translation == node_->metax_cuda_translation &&
                    node.torch_devices == node_->torch_devices;
  node_ = &node;
  if (same) return;
  std::string signature = node.metax_cuda_translation ? "+" : "-";
  for (const auto& t : node.torch_devices) {
    signature += t;
    signature += ',';
  }
  current_ = &by_context_[signature];
  last_ = nullptr;
}

const drivers::CanRunResult& QualifyCache::Get(const DeviceRecord& device) {
  if (device.fingerprint.empty()) return scratch_ = Qualifies(device, requirements_, *node_);
  // A node's cards are usually one class: the previous answer is the likeliest.
  if (last_ != nullptr && last_->first == device.fingerprint) return last_->second;
  auto it = current_->find(device.fingerprint);  // no allocation on a hit
  if (it == current_->end()) it = current_->emplace(device.fingerprint, Qualifies(device, requirements_, *node_)).first;
  last_ = &*it;
  return it->second;
}

uint64_t MemoryHeld(const PlacementRequest& request, const DeviceRecord& device) {
  if (!request.Fractional()) return device.memory_mib;
  if (request.device_memory_mib > 0) return request.device_memory_mib;
  return device.memory_mib * static_cast<uint64_t>(request.device_milli) / 1000;
}

void TakeOnView(const PlacementRequest& request, const NodeAssignment& assignment, NodeView& view) {
  view.cpu_milli_free -= request.cpu_milli;
  view.host_memory_free_mib -= std::min(view.host_memory_free_mib, request.host_memory_mib);
  for (const std::string& id : assignment.device_ids) {
    for (DeviceView& dv : view.devices) {
      if (dv.device->id != id) continue;
      dv.free = false;
      dv.milli_free -= assignment.device_milli;
      dv.memory_free_mib -= std::min(dv.memory_free_mib, assignment.device_memory_mib);
    }
  }
}

void GiveBackOnView(const PlacementRequest& request, const NodeAssignment& assignment, NodeView& view) {
  view.cpu_milli_free += request.cpu_milli;
  view.host_memory_free_mib = std::min(view.host_memory_total_mib, view.host_memory_free_mib + request.host_memory_mib);
  for (const std::string& id : assignment.device_ids) {
    for (DeviceView& dv : view.devices) {
      if (dv.device->id != id) continue;
      dv.milli_free += assignment.device_milli;
      dv.memory_free_mib = std::min(dv.device->memory_mib, dv.memory_free_mib + assignment.device_memory_mib);
      dv.free = dv.milli_free >= 1000;
    }
  }
}

void TakeOnViews(const PlacementRequest& request, const Placement& placement, std::vector<NodeView>& views) {
  for (const auto& assignment : placement.nodes) {
    for (auto& view : views) {
      if (view.name != assignment.node) continue;
      TakeOnView(request, assignment, view);
      view.generation = ContentGeneration(view);
    }
  }
}

bool Available(const PlacementRequest& request, const DeviceView& view) {
  if (!view.device->Placeable()) return false;
  if (!request.Fractional()) return view.free;
  return view.milli_free >= request.device_milli && view.memory_free_mib >= MemoryHeld(request, *view.device);
}

namespace {

// FNV-1a over the fields, with a separator after each so ("ab","c") and ("a","bc") differ.
class ContentHash {
 public:
  void Add(absl::string_view bytes) {
    for (char c : bytes) Mix(static_cast<unsigned char>(c));
    Mix(0xff);
  }
  void Add(uint64_t value) {
    for (int i = 0; i < 8; ++i) Mix(static_cast<unsigned char>(value >> (8 * i)));
  }
  uint64_t value() const { return hash_ == 0 ? 1 : hash_; }

 private:
  void Mix(unsigned char c) { hash_ = (hash_ ^ c) * 0x100000001b3ull; }
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

uint64_t ContentGeneration(const NodeView& view) {
  ContentHash h;
  h.Add(view.name);
  h.Add(static_cast<uint64_t>(view.schedulable) | static_cast<uint64_t>(view.context.metax_cuda_translation) << 1);
  for (const auto& t : view.context.torch_devices) h.Add(t);
  for (const auto& c : view.context.collectives) h.Add(c);
  h.Add(view.container_runtime);
  if (view.images != nullptr) {
    for (const auto& image : *view.images) h.Add(image);
  }
  h.Add(view.rack);
  h.Add(static_cast<uint64_t>(view.cpu_milli_total));
  h.Add(static_cast<uint64_t>(view.cpu_milli_free));
  h.Add(view.host_memory_total_mib);
  h.Add(view.host_memory_free_mib);
  for (const DeviceView& dv : view.devices) {
    const DeviceRecord& d = *dv.device;
    h.Add(d.id);
    h.Add(d.fingerprint);
    h.Add(d.model);
    h.Add(d.health_message);
    h.Add(d.dirty);
    h.Add(static_cast<uint64_t>(d.vendor) | static_cast<uint64_t>(d.healthy) << 8 |
          static_cast<uint64_t>(dv.free) << 9 | static_cast<uint64_t>(dv.held) << 10);
    h.Add(d.memory_mib);
    h.Add(static_cast<uint64_t>(static_cast<uint32_t>(dv.milli_free)));
    h.Add(dv.memory_free_mib);
    for (const Link& l : d.links) {
      h.Add(l.peer_device_id);
      h.Add(static_cast<uint64_t>(l.kind) | static_cast<uint64_t>(static_cast<uint32_t>(l.count)) << 8);
    }
  }
  return h.value();
}

}  // namespace hetpool::scheduler
