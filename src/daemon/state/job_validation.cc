#include "src/daemon/state/job_validation.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "drivers/fingerprint/spec_table.h"
#include "hetpool/vendor.h"
#include "src/common/names.h"

namespace hetpool::daemon {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status CheckText(absl::string_view field, const std::string& value, size_t max) {
  if (value.size() > max) return Invalid(field, absl::StrCat("longer than ", max, " bytes"));
  if (value.find('\0') != std::string::npos) return Invalid(field, "contains a NUL byte");
  return absl::OkStatus();
}

bool IsEnvName(const std::string& name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::Status CheckRange(absl::string_view field, int value, int min, int max) {
  if (value < min || value > max) {
    return Invalid(field, absl::StrCat("must be between ", min, " and ", max, ", got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateNodeName(const std::string& name) {
  return CheckPathComponent("node_name", name, 63);
}

int64_t HostCpuMilliPerNode(const hetpool::v1::JobSpec& spec) {
  return spec.host().cpu_milli_per_process() * std::max(1, spec.procs_per_node()) + spec.host().cpu_milli_per_node();
}

uint64_t HostMemoryMibPerNode(const hetpool::v1::JobSpec& spec) {
  return spec.host().memory_mib_per_process() * static_cast<uint64_t>(std::max(1, spec.procs_per_node())) +
         spec.host().memory_mib_per_node();
}

absl::Status ValidateAndNormalizeSpec(hetpool::v1::JobSpec& spec, const SpecLimits& limits) {
  if (const size_t bytes = spec.ByteSizeLong(); bytes > limits.max_spec_bytes) {
    return Invalid("spec", absl::StrCat(bytes, " bytes in all; at most ", limits.max_spec_bytes,
                                        " (command or python args, env and labels together)"));
  }
  if (auto s = CheckName("name", spec.name(), limits.max_name, false); !s.ok()) return s;
  if (auto s = CheckName("user", spec.user(), limits.max_user, true); !s.ok()) return s;
  if (auto s = CheckName("group", spec.group(), limits.max_user, false); !s.ok()) return s;

  if (spec.labels_size() > static_cast<int>(limits.max_labels)) {
    return Invalid("labels", absl::StrCat("more than ", limits.max_labels, " labels"));
  }
  for (const auto& [key, value] : spec.labels()) {
    if (auto s = CheckName(absl::StrCat("labels[", key, "]"), key, limits.max_label_key, true); !s.ok()) {
      return s;
    }
    if (auto s = CheckText(absl::StrCat("labels[", key, "]"), value, limits.max_label_value); !s.ok()) {
      return s;
    }
  }

  const bool has_command = spec.command_size() > 0;
  const bool has_python = spec.has_python();
  if (has_command == has_python) {
    return Invalid("command", has_command ? "give either command or python, not both"
                                          : "required (an argv list, or python.script)");
  }
  if (has_command) {
    if (spec.command_size() > static_cast<int>(limits.max_args)) {
      return Invalid("command", absl::StrCat("more than ", limits.max_args, " arguments"));
    }
    if (spec.command(0).empty()) return Invalid("command[0]", "the program may not be empty");
    for (int i = 0; i < spec.command_size(); ++i) {
      if (auto s = CheckText(absl::StrCat("command[", i, "]"), spec.command(i), limits.max_arg_bytes);
          !s.ok()) {
        return s;
      }
    }
  } else {
    if (spec.python().script().empty()) return Invalid("python.script", "required");
    if (auto s = CheckText("python.script", spec.python().script(), limits.max_path); !s.ok()) return s;
    if (spec.python().args_size() > static_cast<int>(limits.max_args)) {
      return Invalid("python.args", absl::StrCat("more than ", limits.max_args, " arguments"));
    }
    for (int i = 0; i < spec.python().args_size(); ++i) {
      if (auto s = CheckText(absl::StrCat("python.args[", i, "]"), spec.python().args(i),
                             limits.max_arg_bytes);
          !s.ok()) {
        return s;
      }
    }
  }

  if (spec.working_dir().empty()) {
    return Invalid("working_dir", "required: the absolute path the job runs in on its nodes (hetpoolctl fills in "
                                  "the directory it runs in)");
  }
  if (auto s = CheckText("working_dir", spec.working_dir(), limits.max_path); !s.ok()) return s;
  if (spec.working_dir()[0] != '/') {
    return Invalid("working_dir", "must be an absolute path (the nodes know nothing of where the client runs)");
  }
  for (absl::string_view part : absl::StrSplit(spec.working_dir(), '/')) {
    // The agent also resolves symlinks against its allowed roots; '..' is refused outright.
    if (part == "..") return Invalid("working_dir", "may not contain '..'");
  }

  if (spec.env_size() > static_cast<int>(limits.max_env)) {
    return Invalid("env", absl::StrCat("more than ", limits.max_env, " variables"));
  }
  for (const auto& [key, value] : spec.env()) {
    const std::string field = absl::StrCat("env[", key, "]");
    if (!IsEnvName(key)) return Invalid(field, "not a valid variable name");
    if (absl::StartsWith(key, "HETPOOL_")) return Invalid(field, "HETPOOL_* variables are set by hetpool");
    if (auto s = CheckText(field, value, limits.max_env_value); !s.ok()) return s;
  }

  if (spec.has_elastic_nnodes()) {
    // Elastic: nnodes is its floor, the size the scheduler guarantees (0 is read as min).
    const hetpool::v1::NodeRange& range = spec.elastic_nnodes();
    if (auto s = CheckRange("elastic_nnodes.min", range.min(), 1, limits.max_nnodes); !s.ok()) return s;
    if (auto s = CheckRange("elastic_nnodes.max", range.max(), range.min(), limits.max_nnodes); !s.ok()) return s;
    if (spec.nnodes() == 0) spec.set_nnodes(range.min());
    if (spec.nnodes() != range.min()) {
      return Invalid("nnodes", absl::StrCat("is ", spec.nnodes(), " but elastic_nnodes.min is ", range.min(),
                                            " (an elastic job's nnodes is its min)"));
    }
    if (spec.devices_per_node() < 1) {
      return Invalid("elastic_nnodes", "an elastic job grows and shrinks by cards: devices_per_node must be at least 1");
    }
    if (spec.device_milli() > 0 && spec.device_milli() < 1000) {
      return Invalid("elastic_nnodes", "an elastic job takes whole cards: not with a device_milli share");
    }
    if (spec.has_model()) return Invalid("elastic_nnodes", "not with model (the planner fixes the node count)");
  }
  if (auto s = CheckRange("nnodes", spec.nnodes(), 1, limits.max_nnodes); !s.ok()) return s;
  if (auto s = CheckRange("devices_per_node", spec.devices_per_node(), 0, limits.max_devices_per_node);
      !s.ok()) {
    return s;
  }
  if (spec.procs_per_node() == 0) spec.set_procs_per_node(spec.devices_per_node());
  if (auto s = CheckRange("procs_per_node", spec.procs_per_node(), 1, limits.max_procs_per_node);
      !s.ok()) {
    return spec.devices_per_node() == 0
               ? Invalid("procs_per_node", "required for a CPU job (devices_per_node 0)")
               : s;
  }
  if (auto s = CheckRange("max_restarts", spec.max_restarts(), 0, limits.max_restarts); !s.ok()) return s;
  if (auto s = CheckRange("priority", spec.priority(), -limits.max_priority, limits.max_priority);
      !s.ok()) {
    return s;
  }

  // Preemption: a grace past an hour holds the preemptor's cards idle that long, so it is a typo.
  for (const auto& [field, d] : {std::pair{"preemption_grace", &spec.preemption_grace()},
                                 std::pair{"checkpoint_interval", &spec.checkpoint_interval()}}) {
    if (d->seconds() < 0 || d->nanos() < 0) return Invalid(field, "must not be negative");
  }
  if (spec.preemption_grace().seconds() > 3600) return Invalid("preemption_grace", "at most 3600s");

  if (auto s = CheckRange("device_milli", spec.device_milli(), 0, 1000); !s.ok()) return s;
  const bool fractional = spec.device_milli() > 0 && spec.device_milli() < 1000;
  if (fractional && spec.devices_per_node() != 1) {
    return Invalid("device_milli", "a fractional share takes exactly one device per node (devices_per_node 1)");
  }
  if (!fractional && spec.device_memory_mib() > 0) {
    return Invalid("device_memory_mib", "only with a fractional device_milli (a whole device has all its memory)");
  }
  if (spec.device_memory_mib() > (uint64_t{1} << 24)) return Invalid("device_memory_mib", "more than 16 TiB");

  // Host resources: a node holds at most 1,024 cores and 64 TiB here, so larger asks are typos.
  const hetpool::v1::HostResources& host = spec.host();
  for (const auto& [field, milli] : {std::pair{"host.cpu_milli_per_process", host.cpu_milli_per_process()},
                                     std::pair{"host.cpu_milli_per_node", host.cpu_milli_per_node()}}) {
    if (milli < 0 || milli > kMaxHostCpuMilli) return Invalid(field, "must be 0..1024000 (1000 = one core)");
  }
  for (const auto& [field, mib] : {std::pair{"host.memory_mib_per_process", host.memory_mib_per_process()},
                                   std::pair{"host.memory_mib_per_node", host.memory_mib_per_node()}}) {
    if (mib > kMaxHostMemoryMib) return Invalid(field, "more than 64 TiB");
  }
  if (HostCpuMilliPerNode(spec) > kMaxHostCpuMilli) {
    return Invalid("host", "more than 1,024 cores per node in all (per process x procs_per_node + per node)");
  }
  if (HostMemoryMibPerNode(spec) > kMaxHostMemoryMib) {
    return Invalid("host", "more than 64 TiB per node in all (per process x procs_per_node + per node)");
  }

  const auto& req = spec.requirements();
  std::set<std::string> vendors;
  for (int i = 0; i < req.vendors_size(); ++i) {
    const std::string field = absl::StrCat("requirements.vendors[", i, "]");
    auto vendor = ParseVendor(req.vendors(i));
    if (!vendor) {
      return Invalid(field, absl::StrCat("unknown vendor '", req.vendors(i), "' (known: ",
                                         kKnownVendorList, ")"));
    }
    vendors.insert(req.vendors(i));
  }
  const bool cpu_only = vendors.size() == 1 && vendors.contains("cpu");
  if (cpu_only && spec.devices_per_node() > 0) {
    return Invalid("devices_per_node", "a job restricted to vendor cpu takes no devices (use 0)");
  }
  if (!vendors.empty() && !vendors.contains("cpu") && spec.devices_per_node() == 0) {
    return Invalid("devices_per_node", "0 makes a CPU job, but requirements.vendors excludes cpu");
  }
  for (int i = 0; i < req.precisions_size(); ++i) {
    if (auto p = drivers::ParsePrecision(req.precisions(i)); !p.ok()) {
      return Invalid(absl::StrCat("requirements.precisions[", i, "]"), p.status().message());
    }
  }
  for (const auto& [field, value] : {std::pair{"requirements.min_driver_version", &req.min_driver_version()},
                                     {"requirements.min_runtime_version", &req.min_runtime_version()}}) {
    if (value->size() > 64) return Invalid(field, "longer than 64 characters");
    for (char c : *value) {
      if (!absl::ascii_isdigit(c) && c != '.' && c != '-') return Invalid(field, "expected a dotted version, e.g. 535.104");
    }
  }
  auto check_targets = [](absl::string_view field, const auto& list, absl::string_view prefix,
                          bool allow_a) -> absl::Status {
    if (list.size() > 32) return Invalid(field, "more than 32 entries");
    for (int i = 0; i < list.size(); ++i) {
      const std::string& t = list[i];
      absl::string_view digits = t;
      const bool ok_prefix = absl::ConsumePrefix(&digits, prefix);
      if (allow_a) absl::ConsumeSuffix(&digits, "a");
      const bool ok = ok_prefix && digits.size() >= 2 && digits.size() <= 4 &&
                      std::all_of(digits.begin(), digits.end(), [](char c) { return absl::ascii_isdigit(c); });
      if (!ok) {
        return Invalid(absl::StrCat(field, "[", i, "]"),
                       absl::StrCat("'", t, "' is not of the form ", prefix, "NN", allow_a ? " or " : "",
                                    allow_a ? absl::StrCat(prefix, "NNa") : ""));
      }
    }
    return absl::OkStatus();
  };
  if (auto s = check_targets("requirements.code.cuda_sass", req.code().cuda_sass(), "sm_", true); !s.ok()) return s;
  if (auto s = check_targets("requirements.code.cuda_ptx", req.code().cuda_ptx(), "compute_", false); !s.ok()) return s;
  if (auto s = check_targets("requirements.code.bang", req.code().bang(), "mtp_", false); !s.ok()) return s;
  if (req.models_size() > 64) return Invalid("requirements.models", "more than 64 models");
  for (int i = 0; i < req.models_size(); ++i) {
    if (auto s = CheckText(absl::StrCat("requirements.models[", i, "]"), req.models(i), 128); !s.ok()) {
      return s;
    }
  }
  if (req.fingerprints_size() > 64) return Invalid("requirements.fingerprints", "more than 64 classes");
  for (int i = 0; i < req.fingerprints_size(); ++i) {
    if (auto s = CheckText(absl::StrCat("requirements.fingerprints[", i, "]"), req.fingerprints(i), 64); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRegistration(const hetpool::v1::RegisterRequest& req) {
  if (auto s = ValidateNodeName(req.node_name()); !s.ok()) return s;
  if (req.address().empty() || req.address().size() > 255) {
    return absl::InvalidArgumentError("address: required, at most 255 characters");
  }
  if (req.torchrun_path().empty() || req.torchrun_path()[0] != '/') {
    return absl::InvalidArgumentError("torchrun_path: must be an absolute path");
  }
  if (req.work_dir().empty() || req.work_dir()[0] != '/') {
    return absl::InvalidArgumentError("work_dir: must be an absolute path");
  }
  if (req.labels_size() > 32) return absl::InvalidArgumentError("labels: more than 32 labels");
  for (const auto& [k, v] : req.labels()) {
    if (k.empty() || k.size() > 63 || v.size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat("labels[", k, "]: key 1-63 bytes, value at most 256"));
    }
  }
  return absl::OkStatus();
}

}  // namespace hetpool::daemon
