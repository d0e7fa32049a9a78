#include "src/agent/launch_gate.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace hetpool::agent {

std::string LaunchGate::WhyHeld(const LaunchSpec& spec) const {
  if (!spec.refused.empty()) return "";
  if (!spec.held_for.empty()) return spec.held_for;
  if (spec.run_as.switch_user && probes_.uid_holder) {
    if (const std::string holder = probes_.uid_holder(spec.run_as.uid, spec.user); !holder.empty()) {
      return absl::StrCat("its account ", spec.run_as.account, " (uid ", spec.run_as.uid, ") still runs ", holder);
    }
  }
  // Placed on a card a stranger holds (since the last inventory): wait for it to be clean.
  if (probes_.dirty_cards) {
    if (const std::string dirt = probes_.dirty_cards(spec.device_ids); !dirt.empty()) {
      return absl::StrCat("a card is held by a process of no job: ", dirt);
    }
  }
  return "";
}

bool LaunchGate::Admit(const Runner::Key& key, const LaunchSpec& spec) {
  const std::string why = WhyHeld(spec);
  if (why.empty()) return true;
  auto before = held_.find(key);
  if (before == held_.end() || before->second.why != why) {
    spdlog::warn("job {} g{}: waits: {}", key.first, key.second, why);
  }
  next_[key] = HeldLaunch{why, spec.device_ids};
  return false;
}

void LaunchGate::End(const hetpool::v1::Orders& orders) {
  held_ = std::move(next_);
  next_.clear();
  if (held_.empty()) {
    held_orders_.reset();
  } else {
    held_orders_ = orders;
  }
}

void LaunchGate::Report(google::protobuf::RepeatedPtrField<hetpool::v1::ProcessStatus>& out) const {
  for (const auto& [key, held] : held_) {
    auto* s = out.Add();
    s->set_job_id(key.first);
    s->set_generation(key.second);
    s->set_waiting(held.why);
    for (const auto& d : held.device_ids) s->add_device_ids(d);
  }
}

}  // namespace hetpool::agent
