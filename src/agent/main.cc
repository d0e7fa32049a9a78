// hetpool-agent: one per node. Discovers devices, registers with hetpoold and runs the node's
// share of jobs under torchrun. Wiring only; the work is in session.cc and runner.cc.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "drivers/backend_factory.h"
#include "drivers/inventory_json.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "src/agent/agent_metrics.h"
#include "src/agent/child_exit_watch.h"
#include "src/agent/fence_watchdog.h"
#include "src/agent/container_runtime.h"
#include "src/agent/job_cgroup.h"
#include "src/agent/session.h"
#include "src/common/escaped_log.h"
#include "src/common/flags.h"
#include "src/common/program.h"
#include "src/common/tls.h"

namespace {

int Fail(absl::string_view message) {
  std::cerr << "hetpool-agent: " << message << "\n";
  return 2;
}

std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  for (auto dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    std::string candidate = std::string(dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The interpreter torchrun runs under (its "#!" line, "/usr/bin/env python3" looked up on PATH):
// the Python that has torch, for the jobs the agent starts without torchrun. "" when torchrun
// is not a Python script (a wrapper): Python jobs then start under torchrun.
std::string TorchrunsPython(const std::string& torchrun) {
  std::ifstream in(torchrun);
  std::string line;
  if (!std::getline(in, line) || !absl::StartsWith(line, "#!")) return "";
  std::vector<std::string> words = absl::StrSplit(absl::StripAsciiWhitespace(line.substr(2)), ' ', absl::SkipEmpty());
  if (words.empty()) return "";
  std::string interpreter = words[0];
  if (absl::EndsWith(interpreter, "/env") && words.size() > 1) interpreter = FindOnPath(words[1]);
  const std::string name = std::filesystem::path(interpreter).filename().string();
  if (!absl::StartsWith(name, "python") || access(interpreter.c_str(), X_OK) != 0) return "";
  return interpreter;
}

// This agent's name among the node's cgroups: its node name and its work dir's FNV-1a hash, so
// agents sharing a host (tests, several pools) keep apart, and a restart finds its own.
std::string CgroupAgentName(const std::string& node, const std::string& work_dir) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : work_dir) hash = (hash ^ c) * 16777619u;
  std::string safe;
  for (char c : node) safe += (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return absl::StrCat(safe.substr(0, 64), "-", absl::Hex(hash, absl::kZeroPad8));
}

}  // namespace

int main(int argc, char** argv) {
  hetpool::agent::SessionOptions options;
  std::string server = "127.0.0.1:7070", inventory, config, log_level = "info", spec_table;
  std::vector<std::string> backends, torch_devices, labels, job_dirs;
  std::string run_as_map_file, metrics_listen;
  hetpool::TlsFiles tls;
  bool insecure = false;
  bool print_inventory = false;
  std::string confine = "auto";
  int job_pids_max = 32768, reserve_memory_mib = 1024;
  hetpool::FlagSet flags(
      "hetpool-agent: runs one node's share of hetpool jobs.\n"
      "Example: hetpool-agent --server 10.0.0.1:7070 --node-name node-a --work-dir /var/lib/hetpool-agent \\\n"
      "           --tls-ca pki/ca.pem --tls-cert pki/node-a.pem --tls-key pki/node-a.key --job-dirs /mnt/shared");
  flags.String("server", &server, "hetpoold address(es), comma-separated; tried in turn (or HETPOOL_SERVER)");
  flags.String("node-name", &options.node_name, "this node's name in the pool (default: host name)");
  flags.String("address", &options.address, "address other nodes use to reach this one (rendezvous host)");
  flags.String("work-dir", &options.work_dir, "root for job logs and scratch files");
  std::string dynamic_users_file = hetpool::agent::DynamicUsers::kDefaultPath;
  flags.String("dynamic-users-file", &dynamic_users_file,
               "the host's table of the uids users' jobs run as (run-as dynamic), shared by every agent of the "
               "host under a lock");
  flags.List("backend", &backends,
             "discovery backends: auto (every vendor library that loads: nvml, cndev, mxsml, levelzero), "
             "nvml, cndev, mxsml, levelzero, sysfs, sim (default: auto, or sim with --inventory)");
  flags.String("spec-table", &spec_table, "JSON file overriding or adding card specs (docs/fingerprints.md)");
  flags.List("torch-devices", &torch_devices,
             "torch plugins installed here (cuda, mlu, xpu, cpu); default: cpu + each vendor found");
  flags.List("label", &labels, "node label k=v (repeatable); rack=NAME groups nodes for multi-node jobs");
  flags.String("sysfs-root", &options.collect.sysfs_root, "where sysfs is mounted (for tests)");
  flags.String("inventory", &inventory, "JSON inventory for the sim backend");
  flags.Bool("print-inventory", &print_inventory, "print the discovered inventory as JSON and exit");
  flags.String("torchrun", &options.torchrun_path, "torchrun executable (default: found on PATH)");
  flags.String("python", &options.python_path,
               "the interpreter for Python jobs the agent starts without torchrun (one node, one process; default: "
               "the one torchrun runs under)");
  flags.String("job-path", &options.job_path, "PATH given to job processes");
  flags.Duration("kill-grace", &options.kill_grace, "time between SIGTERM and SIGKILL when stopping a job");
  flags.Duration("run-dir-retention", &options.run_dir_retention,
                 "how long an ended job generation's run directory and node log stay in the work dir (default 72h)");
  int job_disk_limit_mib = 0;
  flags.Int("job-disk-limit-mib", &job_disk_limit_mib,
            "stop a running job whose run directory holds more than this (default 0: no limit)");
  flags.String("health-check", &options.health_check.program,
               "a program run every --health-interval (as Slurm's HealthCheckProgram): a non-zero exit takes "
               "the node out of service, its last line the reason, until a run passes (docs/reliability.md)");
  flags.Duration("health-interval", &options.health_check.interval, "how often --health-check runs (default 5m)");
  flags.Duration("health-timeout", &options.health_check.timeout,
                 "how long one --health-check run may take before it counts as failed (default 1m)");
  flags.Duration("failed-rank-grace", &options.failed_rank_grace,
                 "how long torchrun may linger after a rank failed (its exit barrier, peers stuck in a collective) "
                 "before the agent stops the generation and frees its cards (default 10s)");
  flags.Bool("adapt", &options.adapt,
             "adapt scripts written for cuda and nccl to this node's cards (default true; docs/adapters.md); "
             "false: jobs run as written");
  flags.Bool("preflight", &options.health_check.preflight,
             "run --health-check before each job's first launch on this node too; the launch waits for it, and "
             "a failure sends the job elsewhere as the node's fault");
  std::string fence_after = "auto", on_stop = "handback";
  flags.String("on-stop", &on_stop,
               "on SIGTERM: handback (stop job processes now; hetpoold restarts them elsewhere) or finish "
               "(drain the node, let running jobs end, then exit; a second signal stops them)");
  flags.String("fence-after", &fence_after,
               "stop job processes when no hetpoold answers for this long: auto (the orphan grace the daemon "
               "announces, 10m by default), a shorter duration, or 0 (never)");
  hetpool::AddTlsFlags(flags, &tls, &insecure);
  flags.List("job-dirs", &job_dirs,
             "directories job working dirs must resolve inside (symlinks followed); default: --work-dir");
  flags.String("run-as", &options.sandbox.run_as,
               "when the agent is root: the account for jobs of users --run-as-map does not name: dynamic (default: "
               "a uid of each user's own, docs/security.md), an account such as nobody (shared by them all), or root "
               "(explicit only)");
  flags.String("run-as-map", &run_as_map_file,
               "JSON {\"hetpool user\": \"unix account\", \"*\": ...} for jobs' processes");
  flags.String("metrics-listen", &metrics_listen, "host:port to serve Prometheus device telemetry on (/metrics)");
  flags.Duration("inventory-refresh", &options.inventory_refresh, "how often devices are re-discovered");
  flags.String("confine", &confine,
               "cgroup per job: auto (where cgroups are writable), required (refuse to start without), off");
  flags.Int("job-pids-max", &job_pids_max, "processes and threads one confined job may have on this node");
  flags.Int("reserve-memory-mib", &reserve_memory_mib,
            "host memory kept from all confined jobs together, for the agent and the system");
  std::string container_runtime = "auto";
  hetpool::agent::ContainerRuntimeOptions runtime_options;
  flags.String("container-runtime", &container_runtime,
               "the container runtime CLI jobs in images start through: auto (podman on PATH, if there), none, or "
               "its absolute path (docs/containers.md)");
  flags.List("container-runtime-args", &runtime_options.global_args,
             "options the runtime gets before its command, e.g. --runtime=/usr/sbin/runc (repeatable)");
  flags.String("containers-conf", &runtime_options.containers_conf,
               "containers.conf the runtime reads (CONTAINERS_CONF); default: its own");
  flags.List("container-mount-dirs", &runtime_options.mount_dirs,
             "host directories besides --job-dirs whose contents jobs may mount into their images, read-only");
  flags.String("config", &config, "JSON file whose keys are these flag names");
  flags.String("log-level", &log_level, "trace, debug, info, warn, error");
  if (const char* env = getenv("HETPOOL_SERVER"); env && *env) server = env;
  if (auto exit_code = hetpool::ParseProgramFlags(flags, argc, argv, "hetpool-agent", &config)) return *exit_code;
  // Before anything starts a thread (gRPC does, once credentials are made), so that only the
  // sigwait below receives them.
  const sigset_t signals = hetpool::BlockShutdownSignals();
  hetpool::agent::BlockChildSignals();  // read by the session's ChildExitWatch, in every thread
  // --print-inventory's stdout is the JSON alone (it feeds `hetpoolctl plan --pool`); logs go to stderr.
  if (print_inventory) spdlog::set_default_logger(spdlog::stderr_color_mt("agent-stderr"));
  if (!options.health_check.program.empty() &&
      (options.health_check.program[0] != '/' || access(options.health_check.program.c_str(), X_OK) != 0)) {
    return Fail(absl::StrCat("--health-check: '", options.health_check.program,
                             "' is not an executable file given by its absolute path"));
  }
  if (options.health_check.preflight && options.health_check.program.empty()) {
    return Fail("--preflight needs --health-check PROGRAM");
  }
  if (on_stop != "handback" && on_stop != "finish") {
    std::cerr << "hetpool-agent: --on-stop: expected handback or finish, got '" << on_stop << "'\n";
    return 2;
  }
  if (fence_after != "auto") {
    auto d = hetpool::ParseDurationFlag(fence_after);
    if (!d.ok()) {
      std::cerr << "hetpool-agent: --fence-after: " << d.status().message() << "\n";
      return 2;
    }
    options.fence_after = *d;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  hetpool::UseEscapedLogs("%Y-%m-%dT%H:%M:%S.%e %^%l%$ agent %v");

  if (backends.empty()) backends = {inventory.empty() ? "auto" : "sim"};
  hetpool::drivers::BackendOptions backend_options;
  backend_options.names = backends;
  backend_options.sim_inventory_path = inventory;
  backend_options.sysfs_root = options.collect.sysfs_root;
  backend_options.note = [](const std::string& line) { spdlog::info("{}", line); };
  auto created = hetpool::drivers::CreateBackends(backend_options);
  if (!created.ok()) return Fail(created.status().message());
  hetpool::drivers::SpecTable specs = hetpool::drivers::SpecTable::Defaults();
  if (!spec_table.empty()) {
    std::ifstream in(spec_table);
    if (!in) return Fail(spec_table + ": cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    if (auto s = specs.MergeJson(text.str()); !s.ok()) return Fail(spec_table + ": " + std::string(s.message()));
  }
  options.collect.specs = &specs;
  options.collect.torch_devices = {torch_devices.begin(), torch_devices.end()};
  options.collect.note = backend_options.note;
  if (print_inventory) {
    auto inv = hetpool::drivers::CollectInventory(*created, options.collect);
    if (!inv.ok()) return Fail(inv.status().message());
    std::cout << hetpool::drivers::InventoryToJson(*inv).dump(2) << "\n";
    return 0;
  }

  for (const auto& label : labels) {
    const auto eq = label.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--label expects key=value, got '" + label + "'");
    options.labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  options.servers = absl::StrSplit(server, ',', absl::SkipEmpty());
  if (options.servers.empty()) return Fail("--server: no address given");
  if (options.node_name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    options.node_name = host;
  }
  if (options.work_dir.empty()) return Fail("--work-dir is required");
  if (job_disk_limit_mib < 0) return Fail("--job-disk-limit-mib must be 0 (no limit) or more");
  options.job_disk_limit_mib = static_cast<uint64_t>(job_disk_limit_mib);
  std::error_code ec;
  std::filesystem::create_directories(options.work_dir, ec);
  options.work_dir = std::filesystem::absolute(options.work_dir).lexically_normal().string();
  if (ec) return Fail("--work-dir " + options.work_dir + ": " + ec.message());
  if (auto s = hetpool::CheckTransportFlags(tls, insecure, /*cert_required=*/true); !s.ok()) return Fail(s.message());
  // Forked now, while this process has one thread: making credentials starts gRPC's.
  auto watchdog = hetpool::agent::FenceWatchdog::Start();
  if (!watchdog.ok()) return Fail(watchdog.status().message());
  options.watchdog = watchdog->get();
  auto credentials = hetpool::MakeChannelCredentials(tls, insecure);
  if (!credentials.ok()) return Fail(credentials.status().message());
  options.credentials = *credentials;
  if (insecure) spdlog::warn("--insecure: plaintext, and this agent proves nothing about its node to hetpoold");
  if (job_dirs.empty()) job_dirs = {options.work_dir};
  for (const auto& dir : job_dirs) {
    if (dir.empty() || dir[0] != '/') return Fail("--job-dirs: '" + dir + "' is not an absolute path");
  }
  options.sandbox.job_dirs = job_dirs;
  if (!run_as_map_file.empty()) {
    auto text = hetpool::ReadTextFile(run_as_map_file);
    if (!text.ok()) return Fail(text.status().message());
    auto map = hetpool::agent::ParseRunAsMap(*text);
    if (!map.ok()) return Fail("--run-as-map " + run_as_map_file + ": " + std::string(map.status().message()));
    options.sandbox.run_as_map = *std::move(map);
  }
  // Only root switches users (job_sandbox.h); an agent of another account never reads the table.
  std::unique_ptr<hetpool::agent::DynamicUsers> dynamic_users;
  if (geteuid() == 0) {
    auto opened = hetpool::agent::DynamicUsers::Open(dynamic_users_file, hetpool::agent::DynamicUsers::kDefaultMin,
                                                     hetpool::agent::DynamicUsers::kDefaultMax,
                                                     /*legacy=*/options.work_dir + "/dynamic-users.json");
    if (!opened.ok()) return Fail(opened.status().message());
    dynamic_users = *std::move(opened);
  }
  options.sandbox.dynamic_users = dynamic_users.get();
  if (geteuid() != 0) {
    spdlog::info("not running as root: job processes run as this agent's account");
  } else if (options.sandbox.run_as == "root") {
    spdlog::warn("--run-as root: jobs of unmapped users run as root");
  }
  auto confine_mode = hetpool::agent::ParseConfineMode(confine);
  if (!confine_mode.ok()) return Fail(confine_mode.status().message());
  std::unique_ptr<hetpool::agent::Confinement> confinement;
  if (*confine_mode != hetpool::agent::ConfineMode::kOff) {
    hetpool::agent::ConfinementOptions confine_options;
    confine_options.agent_name = CgroupAgentName(options.node_name, options.work_dir);
    const uint64_t host_mib = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) >> 20;
    if (reserve_memory_mib >= 0 && host_mib > static_cast<uint64_t>(reserve_memory_mib)) {
      confine_options.jobs_memory_mib = host_mib - static_cast<uint64_t>(reserve_memory_mib);
    }
    auto opened = hetpool::agent::Confinement::Open(confine_options);
    if (opened.ok()) {
      confinement = *std::move(opened);
      spdlog::info("confining jobs: {}", confinement->Describe());
      if (!confinement->DevicesEnforced()) spdlog::warn("cards' device files are not restricted on this host");
    } else if (*confine_mode == hetpool::agent::ConfineMode::kRequired) {
      return Fail(absl::StrCat("--confine required: ", opened.status().message()));
    } else {
      spdlog::warn("jobs run unconfined (--confine auto): {}", std::string(opened.status().message()));
    }
  } else {
    spdlog::warn(
        "--confine off: jobs are not held to their memory, cores or cards, and what they leave running "
        "outlives them (docs/security.md)");
  }
  options.confinement = confinement.get();
  auto runtime_program = hetpool::agent::ResolveRuntimeProgram(container_runtime);
  if (!runtime_program.ok()) return Fail(runtime_program.status().message());
  runtime_options.program = *runtime_program;
  std::unique_ptr<hetpool::agent::ContainerRuntime> runtime;
  if (!runtime_options.program.empty()) {
    runtime = std::make_unique<hetpool::agent::ContainerRuntime>(runtime_options);
    if (auto facts = runtime->Facts(); facts.ok()) {
      spdlog::info("jobs in images run through {} {} ({} images here)", facts->name, facts->version,
                   facts->images.size());
    } else {
      spdlog::warn("container runtime {}: {}", runtime_options.program, std::string(facts.status().message()));
    }
    options.container_runtime = runtime.get();
  }
  options.job_pids_max = job_pids_max > 0 ? static_cast<uint64_t>(job_pids_max) : 0;
  if (options.torchrun_path.empty()) options.torchrun_path = FindOnPath("torchrun");
  if (options.torchrun_path.empty()) return Fail("torchrun not found on PATH; pass --torchrun");
  options.torchrun_path = std::filesystem::absolute(options.torchrun_path).string();
  if (options.python_path.empty()) options.python_path = TorchrunsPython(options.torchrun_path);
  if (!options.python_path.empty()) options.python_path = std::filesystem::absolute(options.python_path).string();

  std::atomic<bool> stop{false}, drain{false};
  std::thread waiter([&] {
    int received = 0;
    sigwait(&signals, &received);
    if (on_stop == "finish") {
      spdlog::info("signal {}: draining: no new work, exiting once running jobs end (again: stop them now)", received);
      drain = true;
      sigwait(&signals, &received);
    }
    spdlog::info("signal {}: stopping jobs and exiting", received);
    stop = true;
  });
  waiter.detach();

  hetpool::agent::Session session(options, *std::move(created));
  std::unique_ptr<hetpool::MetricsEndpoint> metrics;  // after the session: stops scraping it first
  if (!metrics_listen.empty()) {
    auto started = hetpool::agent::StartAgentMetrics(metrics_listen, options.node_name,
                                                     [&session] { return session.Telemetry(); });
    if (!started.ok()) return Fail(started.status().message());
    metrics = *std::move(started);
    spdlog::info("metrics on port {} (/metrics)", metrics->port());
  }
  session.Run(&stop, &drain);
  if (confinement != nullptr) {
    if (auto s = confinement->Close(); !s.ok()) spdlog::warn("{}", std::string(s.message()));
  }
  spdlog::info("stopped");
  return 0;
}
