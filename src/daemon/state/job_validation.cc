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
#include "src/common/container_spec.h"
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

// One set of device requirements (the job's, or a role group's at `where`), with the cards it
// goes with (`devices_field`: where that count was given).
absl::Status ValidateRequirements(absl::string_view where, const hetpool::v1::DeviceRequirements& req,
                                  int devices_per_node, absl::string_view devices_field) {
  std::set<std::string> vendors;
  for (int i = 0; i < req.vendors_size(); ++i) {
    const std::string field = absl::StrCat(where, ".vendors[", i, "]");
    auto vendor = ParseVendor(req.vendors(i));
    if (!vendor) {
      return Invalid(field, absl::StrCat("unknown vendor '", req.vendors(i), "' (known: ", kKnownVendorList, ")"));
    }
    vendors.insert(req.vendors(i));
  }
  const bool cpu_only = vendors.size() == 1 && vendors.contains("cpu");
  if (cpu_only && devices_per_node > 0) {
    return Invalid(devices_field, absl::StrCat("a job restricted to vendor cpu takes no devices (use 0)"));
  }
  if (!vendors.empty() && !vendors.contains("cpu") && devices_per_node == 0) {
    return Invalid(devices_field, absl::StrCat("0 makes a CPU job, but ", where, ".vendors excludes cpu"));
  }
  for (int i = 0; i < req.precisions_size(); ++i) {
    if (auto p = drivers::ParsePrecision(req.precisions(i)); !p.ok()) {
      return Invalid(absl::StrCat(where, ".precisions[", i, "]"), p.status().message());
    }
  }
  for (const auto& [name, value] : {std::pair{"min_driver_version", &req.min_driver_version()},
                                    {"min_runtime_version", &req.min_runtime_version()}}) {
    const std::string field = absl::StrCat(where, ".", name);
    if (value->size() > 64) return Invalid(field, "longer than 64 characters");
    for (char c : *value) {
      if (!absl::ascii_isdigit(c) && c != '.' && c != '-')
        return Invalid(field, "expected a dotted version, e.g. 535.104");
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
  if (auto s = check_targets(absl::StrCat(where, ".code.cuda_sass"), req.code().cuda_sass(), "sm_", true); !s.ok())
    return s;
  if (auto s = check_targets(absl::StrCat(where, ".code.cuda_ptx"), req.code().cuda_ptx(), "compute_", false); !s.ok())
    return s;
  if (auto s = check_targets(absl::StrCat(where, ".code.bang"), req.code().bang(), "mtp_", false); !s.ok()) return s;
  if (req.models_size() > 64) return Invalid(absl::StrCat(where, ".models"), "more than 64 models");
  for (int i = 0; i < req.models_size(); ++i) {
    if (auto s = CheckText(absl::StrCat(where, ".models[", i, "]"), req.models(i), 128); !s.ok()) {
      return s;
    }
  }
  if (req.fingerprints_size() > 64) return Invalid(absl::StrCat(where, ".fingerprints"), "more than 64 classes");
  for (int i = 0; i < req.fingerprints_size(); ++i) {
    if (auto s = CheckText(absl::StrCat(where, ".fingerprints[", i, "]"), req.fingerprints(i), 64); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Role groups (a job across vendors): each group checked on its own, then the job's own shape
// filled from them: nnodes their total, devices_per_node and procs_per_node the largest (what
// quotas, host resources and preemption read as "at most per node"). A spec filled so already
// (a stored job's, submitted again) passes as it is.
absl::Status NormalizeRoleGroups(hetpool::v1::JobSpec& spec, const SpecLimits& limits) {
  constexpr int kMaxGroups = 16;
  if (spec.groups_size() > kMaxGroups) return Invalid("groups", absl::StrCat("more than ", kMaxGroups, " groups"));
  if (spec.has_requirements()) {
    return Invalid("groups", "each group says its requirements: leave the job's requirements unset");
  }
  if (spec.mixed_vendors()) return Invalid("groups", "either groups or mixed_vendors, not both");
  std::set<std::string> names;
  int total_nodes = 0, most_devices = 0, most_procs = 0;
  for (int i = 0; i < spec.groups_size(); ++i) {
    hetpool::v1::RoleGroup& group = *spec.mutable_groups(i);
    const std::string where = absl::StrCat("groups[", i, "]");
    if (auto s = CheckName(absl::StrCat(where, ".name"), group.name(), 32, true); !s.ok()) return s;
    if (!names.insert(group.name()).second) {
      return Invalid(absl::StrCat(where, ".name"), absl::StrCat("'", group.name(), "' names two groups"));
    }
    if (auto s = CheckRange(absl::StrCat(where, ".nnodes"), group.nnodes(), 1, limits.max_nnodes); !s.ok()) return s;
    if (auto s = CheckRange(absl::StrCat(where, ".devices_per_node"), group.devices_per_node(), 1,
                            limits.max_devices_per_node);
        !s.ok()) {
      return s;
    }
    if (group.procs_per_node() == 0) group.set_procs_per_node(group.devices_per_node());
    if (auto s =
            CheckRange(absl::StrCat(where, ".procs_per_node"), group.procs_per_node(), 1, limits.max_procs_per_node);
        !s.ok()) {
      return s;
    }
    if (auto s = ValidateRequirements(absl::StrCat(where, ".requirements"), group.requirements(),
                                      group.devices_per_node(), absl::StrCat(where, ".devices_per_node"));
        !s.ok()) {
      return s;
    }
    total_nodes += group.nnodes();
    most_devices = std::max(most_devices, group.devices_per_node());
    most_procs = std::max(most_procs, group.procs_per_node());
  }
  if (total_nodes > limits.max_nnodes) {
    return Invalid("groups", absl::StrCat(total_nodes, " nodes in all; at most ", limits.max_nnodes));
  }
  auto unset_or = [](int given, int filled) { return given == 0 || given == filled; };
  if (!unset_or(spec.nnodes(), total_nodes) || !unset_or(spec.devices_per_node(), most_devices) ||
      !unset_or(spec.procs_per_node(), most_procs)) {
    return Invalid("groups", absl::StrCat("each group says its nodes and cards: leave nnodes, devices_per_node and "
                                          "procs_per_node unset (from the groups: ",
                                          total_nodes, ", ", most_devices, ", ", most_procs, ")"));
  }
  spec.set_nnodes(total_nodes);
  spec.set_devices_per_node(most_devices);
  spec.set_procs_per_node(most_procs);
  return absl::OkStatus();
}

// What a job across vendors may not combine, and the fields only it reads.
absl::Status ValidateAcrossVendors(const hetpool::v1::JobSpec& spec) {
  const bool across = spec.groups_size() > 0 || spec.mixed_vendors();
  static const std::set<std::string> kCollectives = {"", "auto", "gloo", "hierarchical", "flagcx"};
  if (!kCollectives.contains(spec.collective())) {
    return Invalid("collective",
                   absl::StrCat("unknown '", spec.collective().substr(0, 32), "' (auto, gloo, hierarchical, flagcx)"));
  }
  if (!across && !spec.collective().empty()) {
    return Invalid("collective",
                   "only for a job across vendors (groups or mixed_vendors); one vendor's job uses its "
                   "own library");
  }
  const int64_t ranks = TotalRanks(spec);
  if (spec.global_batch() < 0 || spec.global_batch() > (1 << 24)) return Invalid("global_batch", "must be 0..16777216");
  if (spec.global_batch() > 0 && spec.global_batch() < ranks) {
    return Invalid("global_batch",
                   absl::StrCat(spec.global_batch(), " samples for ", ranks, " ranks: every rank needs at least one"));
  }
  if (spec.global_batch() > 0 && spec.has_model()) {
    return Invalid("global_batch", "not with model (the plan sets HETPOOL_MICRO_BATCH)");
  }
  if (spec.global_batch() > 0 && spec.has_elastic_nnodes()) {
    return Invalid("global_batch", "not with elastic_nnodes (the ranks change between rounds; split it in the job)");
  }
  if (!across) return absl::OkStatus();
  const std::string what = spec.mixed_vendors() ? "mixed_vendors" : "groups";
  if (spec.has_elastic_nnodes())
    return Invalid(what, "not with elastic_nnodes (a job across vendors has a fixed shape)");
  if (spec.has_model()) return Invalid(what, "not with model (the planner places one class of cards)");
  if (spec.device_milli() > 0 && spec.device_milli() < 1000)
    return Invalid(what, "takes whole cards: not with device_milli");
  if (spec.mixed_vendors() && spec.devices_per_node() < 1) {
    return Invalid("mixed_vendors", "a job across vendors needs cards: devices_per_node at least 1");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateNodeName(const std::string& name) { return CheckPathComponent("node_name", name, 63); }

int64_t HostCpuMilliPerNode(const hetpool::v1::JobSpec& spec) {
  return spec.host().cpu_milli_per_process() * std::max(1, spec.procs_per_node()) + spec.host().cpu_milli_per_node();
}

int64_t TotalRanks(const hetpool::v1::JobSpec& spec) {
  if (spec.groups_size() == 0) return int64_t{spec.nnodes()} * spec.procs_per_node();
  int64_t ranks = 0;
  for (const auto& group : spec.groups()) ranks += int64_t{group.nnodes()} * group.procs_per_node();
  return ranks;
}

int64_t TotalCards(const hetpool::v1::JobSpec& spec) {
  if (spec.groups_size() == 0) return int64_t{spec.nnodes()} * spec.devices_per_node();
  int64_t cards = 0;
  for (const auto& group : spec.groups()) cards += int64_t{group.nnodes()} * group.devices_per_node();
  return cards;
}

uint64_t HostMemoryMibPerNode(const hetpool::v1::JobSpec& spec) {
  return spec.host().memory_mib_per_process() * static_cast<uint64_t>(std::max(1, spec.procs_per_node())) +
         spec.host().memory_mib_per_node();
}

namespace {

// The spec's size in all, its names and its labels.
absl::Status CheckSizeNamesAndLabels(const hetpool::v1::JobSpec& spec, const SpecLimits& limits) {
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
  return absl::OkStatus();
}

// What runs: a command or a python script, never both, with bounded arguments.
absl::Status CheckProgram(const hetpool::v1::JobSpec& spec, const SpecLimits& limits) {
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
      if (auto s = CheckText(absl::StrCat("command[", i, "]"), spec.command(i), limits.max_arg_bytes); !s.ok()) {
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
      if (auto s = CheckText(absl::StrCat("python.args[", i, "]"), spec.python().args(i), limits.max_arg_bytes);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

// The absolute working dir (no '..'), and the environment (no HETPOOL_* variables).
absl::Status CheckWorkingDirAndEnv(const hetpool::v1::JobSpec& spec, const SpecLimits& limits) {
  if (spec.working_dir().empty()) {
    return Invalid("working_dir",
                   "required: the absolute path the job runs in on its nodes (hetpoolctl fills in "
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
  return absl::OkStatus();
}

// auto, direct (one node, one process: nothing for torchrun to coordinate) or torchrun.
absl::Status CheckLauncher(const hetpool::v1::JobSpec& spec) {
  const std::string& launcher = spec.launcher();
  if (launcher.empty() || launcher == "auto" || launcher == "torchrun") return absl::OkStatus();
  if (launcher != "direct")
    return Invalid("launcher", absl::StrCat("'", launcher, "': must be auto, direct or torchrun"));
  if (spec.groups_size() > 0 || spec.mixed_vendors())
    return Invalid("launcher", "direct: not for a job across vendors");
  if (spec.has_elastic_nnodes()) return Invalid("launcher", "direct: not for an elastic job (torchrun resizes it)");
  if (spec.has_model()) return Invalid("launcher", "direct: not with model (the planner picks the node count)");
  if (spec.nnodes() != 1 || spec.procs_per_node() != 1) {
    return Invalid("launcher",
                   absl::StrCat("direct starts one process on one node, but the job has nnodes ", spec.nnodes(),
                                " and procs_per_node ", spec.procs_per_node(), " (use auto or torchrun)"));
  }
  return absl::OkStatus();
}

// An array's size and how many of its tasks may run at once.
absl::Status CheckArray(const hetpool::v1::JobSpec& spec) {
  if (!spec.has_array()) return absl::OkStatus();
  constexpr int kMaxArrayTasks = 100000;
  if (auto s = CheckRange("array.count", spec.array().count(), 1, kMaxArrayTasks); !s.ok()) return s;
  if (auto s = CheckRange("array.max_running", spec.array().max_running(), 0, spec.array().count()); !s.ok()) {
    return s;
  }
  if (spec.has_elastic_nnodes()) return Invalid("array", "not for an elastic job (each task is resized on its own)");
  return absl::OkStatus();
}

// The job's shape: role groups, an elastic range (nnodes is its min), nodes, devices, procs (one per device by
// default), restarts and priority.
absl::Status NormalizeShape(hetpool::v1::JobSpec& spec, const SpecLimits& limits) {
  if (spec.groups_size() > 0) {
    if (auto s = NormalizeRoleGroups(spec, limits); !s.ok()) return s;
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
      return Invalid("elastic_nnodes",
                     "an elastic job grows and shrinks by cards: devices_per_node must be at least 1");
    }
    if (spec.device_milli() > 0 && spec.device_milli() < 1000) {
      return Invalid("elastic_nnodes", "an elastic job takes whole cards: not with a device_milli share");
    }
    if (spec.has_model()) return Invalid("elastic_nnodes", "not with model (the planner fixes the node count)");
  }
  if (auto s = CheckRange("nnodes", spec.nnodes(), 1, limits.max_nnodes); !s.ok()) return s;
  if (auto s = CheckRange("devices_per_node", spec.devices_per_node(), 0, limits.max_devices_per_node); !s.ok()) {
    return s;
  }
  if (spec.procs_per_node() == 0) spec.set_procs_per_node(spec.devices_per_node());
  if (auto s = CheckRange("procs_per_node", spec.procs_per_node(), 1, limits.max_procs_per_node); !s.ok()) {
    return spec.devices_per_node() == 0 ? Invalid("procs_per_node", "required for a CPU job (devices_per_node 0)") : s;
  }
  if (auto s = CheckLauncher(spec); !s.ok()) return s;
  if (auto s = CheckArray(spec); !s.ok()) return s;
  if (auto s = CheckRange("max_restarts", spec.max_restarts(), 0, limits.max_restarts); !s.ok()) return s;
  if (auto s = CheckRange("priority", spec.priority(), -limits.max_priority, limits.max_priority); !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

// Preemption grace, a card share and its memory, and host CPU and memory asks.
absl::Status CheckSharesAndHost(const hetpool::v1::JobSpec& spec) {
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
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateAndNormalizeSpec(hetpool::v1::JobSpec& spec, const SpecLimits& limits) {
  for (auto check : {CheckSizeNamesAndLabels, CheckProgram, CheckWorkingDirAndEnv}) {
    if (auto s = check(spec, limits); !s.ok()) return s;
  }
  if (auto s = NormalizeShape(spec, limits); !s.ok()) return s;
  if (auto s = CheckSharesAndHost(spec); !s.ok()) return s;
  if (auto s = ValidateRequirements("requirements", spec.requirements(), spec.devices_per_node(), "devices_per_node");
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateAcrossVendors(spec); !s.ok()) return s;
  return ValidateContainerSpec(spec);
}

absl::Status ValidateRegistration(const hetpool::v1::RegisterRequest& req) {
  if (auto s = ValidateNodeName(req.node_name()); !s.ok()) return s;
  if (req.address().empty() || req.address().size() > 255) {
    return absl::InvalidArgumentError("address: required, at most 255 characters");
  }
  if (req.torchrun_path().empty() || req.torchrun_path()[0] != '/') {
    return absl::InvalidArgumentError("torchrun_path: must be an absolute path");
  }
  if (!req.python_path().empty() && req.python_path()[0] != '/') {
    return absl::InvalidArgumentError("python_path: must be an absolute path (or empty)");
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
