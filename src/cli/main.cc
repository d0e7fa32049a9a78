// hetpoolctl: the command-line client for researchers, CI pipelines and operators.
// Every command is one or two RPCs; errors print one line and exit non-zero.
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/support/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "hetpool/v1/cluster.grpc.pb.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "src/cli/client.h"
#include "src/cli/junit_report.h"
#include "src/cli/output.h"
#include "src/cli/admin_command.h"
#include "src/cli/plan_command.h"
#include "src/cli/usage_command.h"
#include "src/common/convert.h"
#include "src/common/plan_convert.h"
#include "src/common/flags.h"
#include "src/common/grpc_status.h"
#include "src/common/json_keys.h"

namespace hetpool::cli {
namespace {

std::string Placement(const pb::Job& job) {
  std::vector<std::string> parts;
  for (const auto& p : job.placement()) {
    parts.push_back(p.device_ids_size() ? absl::StrCat(p.node(), "[", absl::StrJoin(p.device_ids(), ","), "]",
                                                       p.device_ids_size() > 1 ? absl::StrCat("(link ", p.link_score(), ")") : "")
                                        : p.node());
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

void PrintJobDetail(const pb::Job& job) {
  const auto& spec = job.spec();
  std::cout << "id:          " << job.id() << "\n"
            << "name:        " << spec.name() << "\n"
            << "user:        " << spec.user() << "\n"
            << "state:       " << JobStateName(job.state()) << "\n"
            << "reason:      " << job.reason() << (job.message().empty() ? "" : ": ") << job.message() << "\n"
            << "shape:       " << spec.nnodes() << " node(s) x " << spec.devices_per_node()
            << " device(s), " << spec.procs_per_node() << " process(es) per node\n"
            << "generation:  " << job.generation() << " (restarts " << job.restart_count() << "/"
            << spec.max_restarts() << ")\n"
            << "vendor:      " << (job.vendor().empty() ? "-" : job.vendor()) << "\n"
            << "rendezvous:  " << (job.rendezvous_endpoint().empty() ? "-" : job.rendezvous_endpoint()) << "\n"
            << "placement:   " << Placement(job) << "\n";
  if (job.has_pending() && job.state() == pb::JOB_STATE_PENDING) {
    const pb::PendingReason& w = job.pending();
    std::cout << "waiting:     " << (w.never_fits() ? "can never run in this pool as it is" : "for capacity") << "\n"
              << "  needs:     " << w.needs() << "\n";
    if (!w.closest().empty()) std::cout << "  closest:   " << w.closest() << "\n";
    if (!w.nodes_rejected().empty()) {
      std::map<std::string, int> sorted(w.nodes_rejected().begin(), w.nodes_rejected().end());
      std::vector<std::string> parts;
      for (const auto& [plugin, n] : sorted) parts.push_back(absl::StrCat(plugin, " ", n));
      std::cout << "  turned away by: " << absl::StrJoin(parts, ", ") << " (nodes)\n";
    }
    for (const auto& reason : w.device_reasons()) std::cout << "  device:    " << reason << "\n";
    if (!w.held_for_it().empty()) std::cout << "  holding:   " << w.held_for_it() << " (first in line)\n";
    if (!w.quota().empty()) std::cout << "  quota:     " << w.quota() << "\n";
  }
  if (job.has_failure()) {
    const pb::RankFailure& f = job.failure();
    std::cout << "failure:     ";
    if (!f.launch_failure().empty()) {
      std::cout << f.launch_failure() << " on " << f.node();
    } else if (f.global_rank() >= 0) {
      std::cout << "rank " << f.global_rank() << " (local rank " << f.local_rank() << " on " << f.node() << ") "
                << (f.signal().empty() ? absl::StrCat("exited with code ", f.exit_code()) : "killed by " + f.signal());
    } else {
      std::cout << "node " << f.node();
    }
    if (job.failure_origin() != pb::FAILURE_ORIGIN_UNSPECIFIED) {
      std::cout << (job.failure_origin() == pb::FAILURE_ORIGIN_JOB ? " (the job's own)" : " (infrastructure)");
    }
    std::cout << "\n";
    for (const auto& line : f.last_lines()) std::cout << "  | " << line << "\n";
  }
  if (job.has_plan()) {
    const pb::PlanRow& p = job.plan();
    std::cout << "plan:        " << p.label() << ": " << LayoutName(p) << ", micro-batch " << p.micro_batch() << "\n";
  }
  for (const auto& plan : job.launch_plan()) {
    std::cout << "launch on " << plan.node() << " (node rank " << plan.node_rank() << ", "
              << plan.dist_backend() << "/" << plan.torch_device() << "):\n  argv: "
              << absl::StrJoin(plan.argv(), " ") << "\n  env:";
    std::map<std::string, std::string> env(plan.env().begin(), plan.env().end());
    for (const auto& [k, v] : env) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }
  std::cout << "events:\n";
  for (const auto& e : job.events()) {
    std::cout << "  " << absl::FormatTime("%H:%M:%S", FromProtoTime(e.time()), absl::LocalTimeZone())
              << "  " << e.reason() << (e.message().empty() ? "" : ": ") << e.message() << "\n";
  }
}

// --- job commands ------------------------------------------------------------------------------

// A python.script that is missing where this machine can see the working dir: refused before it
// takes cards. A working dir this machine does not have is left to the agent (which checks it
// as the job's account before torchrun starts).
absl::Status CheckScriptVisibleHere(const pb::JobSpec& spec) {
  if (!spec.has_python() || spec.python().script().empty()) return absl::OkStatus();
  std::error_code ec;
  if (!std::filesystem::is_directory(spec.working_dir(), ec)) return absl::OkStatus();
  const std::filesystem::path script = std::filesystem::path(spec.working_dir()) / spec.python().script();
  if (std::filesystem::is_regular_file(script, ec)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("python.script: ", spec.python().script(), " not found in ",
                                          spec.working_dir(),
                                          " (checked on this machine; --skip-script-check if the nodes see "
                                          "another filesystem)"));
}

int Submit(Client& client, const std::vector<std::string>& args) {
  std::string file, request_id;
  bool skip_script_check = false;
  FlagSet flags("hetpoolctl submit -f job.json [--request-id ID] [--skip-script-check]\n"
                "Example: hetpoolctl submit -f deploy/examples/ddp-job.json");
  flags.String("file", &file, "job file: protobuf JSON of hetpool.v1.JobSpec ('-' for stdin)");
  flags.Alias("-f", "file");
  flags.String("request-id", &request_id, "idempotency token: a retry with it returns the first job");
  flags.Bool("skip-script-check", &skip_script_check,
             "do not check here that python.script exists under working_dir (the agent still does)");
  std::vector<std::string> rest;
  if (int code = ParseFlags(flags, args, &rest); code >= 0) return code;
  if (!rest.empty()) return Usage("submit takes no positional arguments");
  if (file.empty()) return Usage("submit needs -f FILE");
  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(file);
    if (!in) return Error(absl::NotFoundError(absl::StrCat(file, ": cannot be read")));
    text << in.rdbuf();
  }
  pb::SubmitJobRequest req;
  if (auto s = CheckNoDuplicateKeys(text.str()); !s.ok()) {
    return Error(absl::InvalidArgumentError(absl::StrCat(file, ": ", s.message())));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a misspelt field is an error, not silently dropped
  auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), req.mutable_spec(), options);
  if (!parsed.ok()) {
    return Error(absl::InvalidArgumentError(absl::StrCat(file, ": ", parsed.message().as_string())));
  }
  pb::JobSpec& spec = *req.mutable_spec();
  if (spec.user().empty() && !client.has_token()) {
    // With a token hetpoold records the token's user; without one (--insecure) the user says.
    // $USER, else the account this command runs as (USER is unset under cron, CI and systemd).
    const char* user = getenv("USER");
    const passwd* account = getpwuid(getuid());
    spec.set_user(user && *user ? user : account ? account->pw_name : "unknown");
  }
  // Relative paths in a job file are relative to where it is submitted from (like sbatch).
  if (spec.working_dir().empty()) spec.set_working_dir(std::filesystem::current_path().string());
  if (!skip_script_check) {
    if (auto s = CheckScriptVisibleHere(spec); !s.ok()) return Error(s);
  }
  req.set_request_id(request_id);
  pb::SubmitJobResponse resp;
  auto status = client.jobs().SubmitJob(client.Context().get(), req, &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp.job());
  } else {
    std::cout << resp.job().id() << "\n";
  }
  return 0;
}

int Get(Client& client, const std::vector<std::string>& args) {
  if (args.size() != 1) return Usage("get takes one job id");
  pb::GetJobRequest req;
  req.set_job_id(args[0]);
  pb::Job job;
  auto status = client.jobs().GetJob(client.Context().get(), req, &job);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(job);
  } else {
    PrintJobDetail(job);
  }
  return 0;
}

int List(Client& client, const std::vector<std::string>& args) {
  std::vector<std::string> states, labels;
  std::string user;
  FlagSet flags("hetpoolctl list [--state S] [--user U] [--label k=v]\n"
                "Example: hetpoolctl list --state running --label team=nlp");
  flags.List("state", &states,
             "only jobs in these states: pending, scheduled, running, succeeded, failed, cancelled (or as -o json "
             "prints them: JOB_STATE_FAILED)");
  flags.String("user", &user, "only this user's jobs");
  flags.List("label", &labels, "only jobs with this label (k=v); repeatable");
  std::vector<std::string> rest_args;
  if (int code = ParseFlags(flags, args, &rest_args); code >= 0) return code;
  if (!rest_args.empty()) return Usage("list takes no positional arguments");
  pb::ListJobsRequest req;
  req.set_user(user);
  for (const auto& s : states) {
    auto state = ParseJobState(s);
    if (!state.ok()) return Error(state.status());
    req.add_states(*state);
  }
  for (const auto& l : labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(l, absl::MaxSplits('=', 1));
    (*req.mutable_labels())[kv.first] = kv.second;
  }
  pb::ListJobsResponse all;
  do {
    pb::ListJobsResponse page;
    auto status = client.jobs().ListJobs(client.Context().get(), req, &page);
    if (!status.ok()) return client.Failed(status);
    for (auto& j : *page.mutable_jobs()) *all.add_jobs() = std::move(j);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  if (client.json()) {
    std::cout << ToJson(all);
    return 0;
  }
  Table table({"ID", "NAME", "USER", "STATE", "SHAPE", "PLACEMENT", "AGE", "REASON"});
  for (const auto& j : all.jobs()) {
    table.Add({j.id(), j.spec().name(), j.spec().user(), std::string(JobStateName(j.state())),
               absl::StrCat(j.spec().nnodes(), "x", j.spec().devices_per_node()), Placement(j),
               Age(j.created_at().seconds()), j.reason()});
  }
  std::cout << table.Render();
  return 0;
}

int Cancel(Client& client, const std::vector<std::string>& args) {
  std::string reason;
  FlagSet flags("hetpoolctl cancel ID [--reason TEXT]\nExample: hetpoolctl cancel job-000007");
  flags.String("reason", &reason, "recorded in the job's events");
  std::vector<std::string> rest_args;
  if (int code = ParseFlags(flags, args, &rest_args); code >= 0) return code;
  auto rest = &rest_args;
  if (rest->size() != 1) return Usage("cancel takes one job id");
  pb::CancelJobRequest req;
  req.set_job_id((*rest)[0]);
  req.set_reason(reason);
  pb::Job job;
  auto status = client.jobs().CancelJob(client.Context().get(), req, &job);
  if (!status.ok()) return client.Failed(status);
  std::cout << job.id() << " " << JobStateName(job.state()) << "\n";
  return 0;
}

int Logs(Client& client, const std::vector<std::string>& args) {
  bool follow = false;
  std::string node;
  int rank = -1;
  bool raw = false;
  FlagSet flags("hetpoolctl logs ID [-f] [--node N] [--rank R] [--raw]\n"
                "Each line starts with where it came from: [node rGLOBAL] for a rank's stdout, [node] for\n"
                "the rest (stderr, which torchrun does not tag); torchrun's INFO/WARNING lines are left out.\n"
                "Example: hetpoolctl logs job-000007 -f --rank 0");
  flags.Bool("follow", &follow, "keep streaming until the job ends");
  flags.Alias("-f", "follow");
  flags.String("node", &node, "only this node's output");
  flags.Int("rank", &rank, "only this global rank's stdout (torchrun-tagged lines)");
  flags.Bool("raw", &raw, "the output as torchrun wrote it: [default<local rank>]: tags, its own log lines");
  std::vector<std::string> rest_args;
  if (int code = ParseFlags(flags, args, &rest_args); code >= 0) return code;
  auto rest = &rest_args;
  if (rest->size() != 1) return Usage("logs takes one job id");
  pb::GetJobLogsRequest req;
  req.set_job_id((*rest)[0]);
  req.set_node(node);
  req.set_follow(follow);
  req.set_raw(raw);
  if (flags.WasSet("rank")) {
    req.set_rank(rank);
  }
  auto ctx = client.Context(follow ? absl::InfiniteDuration() : absl::ZeroDuration());
  auto reader = client.jobs().GetJobLogs(ctx.get(), req);
  pb::LogChunk chunk;
  while (reader->Read(&chunk)) std::cout << chunk.data() << std::flush;
  auto status = reader->Finish();
  return status.ok() ? 0 : client.Failed(status);
}

// Streams the job's changes; `on_update` returns false to stop early.
grpc::Status Watch(Client& client, const std::string& id, absl::Duration timeout,
                   const std::function<void(const pb::WatchJobResponse&)>& on_update, pb::Job* last) {
  pb::WatchJobRequest req;
  req.set_job_id(id);
  auto ctx = client.Context(timeout);
  auto reader = client.jobs().WatchJob(ctx.get(), req);
  pb::WatchJobResponse update;
  while (reader->Read(&update)) {
    *last = update.job();
    on_update(update);
  }
  return reader->Finish();
}

// "SIGSEGV" -> 11; 0 when unknown.
int SignalNumber(const std::string& name) {
  for (int n = 1; n < 65; ++n) {
    const char* abbrev = sigabbrev_np(n);
    if (abbrev != nullptr && name == absl::StrCat("SIG", abbrev)) return n;
  }
  return 0;
}

// What `wait` exits with for a job that ended (docs/cli.md has the table).
int WaitExitCode(const pb::Job& job, bool job_exit_code) {
  switch (job.state()) {
    case pb::JOB_STATE_SUCCEEDED:
      return 0;
    case pb::JOB_STATE_CANCELLED:
      return kExitJobCancelled;
    default:
      break;
  }
  if (job.failure_origin() == pb::FAILURE_ORIGIN_INFRASTRUCTURE) return kExitInfrastructure;
  const pb::RankFailure& f = job.failure();
  if (job_exit_code && f.launch_failure().empty() && f.global_rank() >= 0) {
    // The script's own status, as a shell reports it: 128 + N for a signal.
    if (!f.signal().empty()) {
      const int number = SignalNumber(f.signal());
      if (number > 0) return 128 + number;
    } else if (f.exit_code() > 0 && f.exit_code() < 256) {
      return f.exit_code();
    }
  }
  return kExitJobFailed;
}

int WatchCmd(Client& client, const std::vector<std::string>& args) {
  bool job_exit_code = false;
  FlagSet flags("hetpoolctl watch ID [--job-exit-code]\n"
                "Prints each event of the job from its first until it ends, then exits like wait.\n"
                "With -o json: JSON Lines, one event per line with the job's id and generation.\n"
                "Example: hetpoolctl -o json watch job-000007 | jq -r .reason");
  flags.Bool("job-exit-code", &job_exit_code, "as wait --job-exit-code");
  std::vector<std::string> rest;
  if (int code = ParseFlags(flags, args, &rest); code >= 0) return code;
  if (rest.size() != 1) return Usage("watch takes one job id");
  int printed = 0;
  pb::Job last;
  // Every event not yet shown, from the first (the stream starts with the job as it is now).
  auto status = Watch(client, rest[0], absl::InfiniteDuration(), [&](const pb::WatchJobResponse& u) {
    const auto& events = u.job().events();
    for (int i = printed; i < events.size(); ++i) {
      if (client.json()) {
        pb::WatchEvent line;
        line.set_job_id(u.job().id());
        line.set_generation(u.job().generation());
        *line.mutable_event() = events[i];
        std::cout << ToJsonLine(line) << std::flush;
        continue;
      }
      std::cout << absl::FormatTime("%H:%M:%S", FromProtoTime(events[i].time()), absl::LocalTimeZone())
                << "  " << JobStateName(events[i].state()) << "  " << events[i].reason()
                << (events[i].message().empty() ? "" : ": ") << events[i].message() << "\n" << std::flush;
    }
    printed = events.size();
  }, &last);
  if (!status.ok()) return client.Failed(status);
  return WaitExitCode(last, job_exit_code);
}

int Wait(Client& client, const std::vector<std::string>& args) {
  absl::Duration timeout = absl::Seconds(300);
  bool job_exit_code = false;
  std::string junit;
  FlagSet flags("hetpoolctl wait ID [--timeout 300s] [--job-exit-code] [--junit FILE]\n"
                "Exit status: 0 SUCCEEDED, 3 FAILED by the job itself (its program failed, its script or\n"
                "working dir is missing), 4 FAILED by the infrastructure (nodes or processes lost, a node\n"
                "could not launch it), 5 CANCELLED, 124 timeout, 1 hetpoolctl error, 2 usage.\n"
                "Example: hetpoolctl wait job-000007 --timeout 10m --job-exit-code");
  flags.Duration("timeout", &timeout, "give up after this long");
  flags.String("junit", &junit, "also write the outcome as a JUnit XML report to FILE (CI test results)");
  flags.Bool("job-exit-code", &job_exit_code,
             "when the job's own program failed, exit with the failing rank's exit code (128+N for signal N) instead of 3");
  std::vector<std::string> rest_args;
  if (int code = ParseFlags(flags, args, &rest_args); code >= 0) return code;
  auto rest = &rest_args;
  if (rest->size() != 1) return Usage("wait takes one job id");
  pb::Job last;
  auto status = Watch(client, (*rest)[0], timeout, [](const pb::WatchJobResponse&) {}, &last);
  const bool timed_out = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (!junit.empty() && (status.ok() || (timed_out && !last.id().empty()))) {
    if (auto s = WriteJunitReport(junit, last, timed_out); !s.ok()) return Error(s);
  }
  if (timed_out) {
    std::cerr << "hetpoolctl: timed out after " << absl::FormatDuration(timeout) << "; job is "
              << JobStateName(last.state()) << "\n";
    return kExitTimeout;
  }
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(last);
  } else {
    std::cout << last.id() << " " << JobStateName(last.state()) << " (" << last.reason()
              << (last.message().empty() ? "" : ": ") << last.message() << ")\n";
  }
  return WaitExitCode(last, job_exit_code);
}

// --- cluster commands --------------------------------------------------------------------------

int Nodes(Client& client, const std::vector<std::string>& args) {
  if (!args.empty()) return Usage("nodes takes no arguments");
  pb::ListNodesResponse resp;
  auto status = client.cluster().ListNodes(client.Context().get(), pb::ListNodesRequest(), &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  Table table({"NAME", "STATE", "ADDRESS", "DEVICES", "CPUS", "BACKEND", "LABELS", "JOBS", "HEARTBEAT"});
  for (const auto& n : resp.nodes()) {
    std::map<std::string, int> by_model;
    for (const auto& d : n.inventory().devices()) ++by_model[d.vendor() + "/" + d.model()];
    std::vector<std::string> devices;
    for (const auto& [model, count] : by_model) devices.push_back(absl::StrCat(count, "x", model));
    std::string state = n.state() == pb::NODE_STATE_READY ? "Ready" : "NotReady";
    if (n.drained()) state += ",Drained";
    std::map<std::string, std::string> labels(n.labels().begin(), n.labels().end());
    table.Add({n.name(), state, n.address(), devices.empty() ? "cpu-only" : absl::StrJoin(devices, " "),
               absl::StrCat(n.inventory().cpus()), n.inventory().backend(),
               labels.empty() ? "-" : absl::StrJoin(labels, ",", absl::PairFormatter("=")),
               absl::StrJoin(n.running_jobs(), ","), Age(n.last_heartbeat().seconds())});
  }
  std::cout << table.Render();
  return 0;
}

int Devices(Client& client, const std::vector<std::string>& args) {
  pb::ListDevicesRequest req;
  std::string node, vendor;
  FlagSet flags("hetpoolctl devices [--node N] [--vendor V]\nExample: hetpoolctl devices --vendor metax");
  flags.String("node", &node, "only this node");
  flags.String("vendor", &vendor, "only this vendor");
  std::vector<std::string> rest_args;
  if (int code = ParseFlags(flags, args, &rest_args); code >= 0) return code;
  if (!rest_args.empty()) return Usage("devices takes no positional arguments");
  req.set_node(node);
  req.set_vendor(vendor);
  pb::ListDevicesResponse resp;
  auto status = client.cluster().ListDevices(client.Context().get(), req, &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  Table table({"NODE", "DEVICE", "VENDOR", "MODEL", "ARCH", "MEMORY", "NUMA", "PCI", "FINGERPRINT", "HEALTH", "JOB"});
  for (const auto& v : resp.devices()) {
    const auto& d = v.device();
    table.Add({v.node(), d.id(), d.vendor(), d.model(), d.architecture(),
               absl::StrCat(d.memory_mib() / 1024, " GiB"), absl::StrCat(d.numa_node()), d.pci_bus_id(),
               d.fingerprint(), d.healthy() ? "ok" : "unhealthy: " + d.health_message(),
               v.allocated_to().empty()
                   ? "-"
                   : absl::StrCat(v.allocated_to(), " (", v.allocated_milli(), "/1000)")});
  }
  std::cout << table.Render();
  return 0;
}

int Fingerprints(Client& client, const std::vector<std::string>& args) {
  if (!args.empty()) return Usage("fingerprints takes no arguments");
  pb::ListFingerprintsResponse resp;
  auto status = client.cluster().ListFingerprints(client.Context().get(), pb::ListFingerprintsRequest(), &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  Table table({"FINGERPRINT", "CLASS", "PRECISIONS", "BW GB/s", "FREE/TOTAL", "UNHEALTHY", "NODES"});
  for (const auto& c : resp.classes()) {
    const auto& cap = c.example().capability();
    table.Add({c.fingerprint(), c.label(), absl::StrJoin(cap.precisions(), ","),
               cap.bandwidth_gbps() > 0 ? absl::StrCat(cap.bandwidth_gbps()) : "?",
               absl::StrCat(c.free(), "/", c.total()), absl::StrCat(c.unhealthy()), absl::StrJoin(c.nodes(), ",")});
  }
  std::cout << table.Render();
  return 0;
}

int Drain(Client& client, const std::vector<std::string>& args, bool drain) {
  if (args.size() != 1) return Usage(drain ? "drain takes one node name" : "undrain takes one node name");
  pb::DrainNodeRequest req;
  req.set_name(args[0]);
  pb::Node node;
  auto ctx = client.Context();
  auto status = drain ? client.cluster().DrainNode(ctx.get(), req, &node)
                      : client.cluster().UndrainNode(ctx.get(), req, &node);
  if (!status.ok()) return client.Failed(status);
  std::cout << node.name() << (node.drained() ? " drained" : " undrained") << "\n";
  return 0;
}

constexpr const char* kUsage =
    "hetpoolctl: submit and follow jobs on a hetpool GPU pool.\n\n"
    "Usage: hetpoolctl [--server ADDR] [--tls-ca FILE] [--token T | --token-file FILE] [--insecure]\n"
    "                  [-o table|json] [--timeout 30s] COMMAND ...\n"
    "  --server defaults to $HETPOOL_SERVER, then 127.0.0.1:7070; several, comma-separated, for\n"
    "    replicas on etcd: the leader is used\n"
    "  --tls-ca: the pool's CA ($HETPOOL_TLS_CA); --token: your bearer token ($HETPOOL_TOKEN);\n"
    "    --insecure ($HETPOOL_INSECURE=1): plaintext, for a daemon started with --insecure\n\n"
    "Commands (each with an example):\n"
    "  submit -f FILE       hetpoolctl submit -f deploy/examples/ddp-job.json\n"
    "  get ID               hetpoolctl get job-000001\n"
    "  list                 hetpoolctl list --state running --user alice\n"
    "  cancel ID            hetpoolctl cancel job-000001 --reason 'wrong data'\n"
    "  logs ID              hetpoolctl logs job-000001 -f --rank 0\n"
    "  watch ID             hetpoolctl watch job-000001\n"
    "  wait ID              hetpoolctl wait job-000001 --timeout 10m\n"
    "  nodes                hetpoolctl nodes\n"
    "  devices              hetpoolctl devices --vendor nvidia\n"
    "  fingerprints         hetpoolctl fingerprints       (classes of identical cards: free/total, nodes)\n"
    "  plan                 hetpoolctl plan --model llama-2-70b --mode train --precision bf16 --seq 4096 --tokens 2e9 --zero 3\n"
    "                       (ranked plans per class of cards: layout, memory, time, cost; --pool FILE... offline)\n"
    "  usage                hetpoolctl usage --since 30d --by group -o csv   (card-hours and cost: job, user,\n"
    "                       group or class)\n"
    "  drain NODE           hetpoolctl drain node-a\n"
    "  undrain NODE         hetpoolctl undrain node-a\n"
    "  admin token          hetpoolctl admin token --file /etc/hetpool/tokens.json --user alice --group vision --role user\n"
    "                       (prints a new bearer token; its hash goes into the daemon's --tokens file)\n"
    "  admin revoke         hetpoolctl admin revoke --file /etc/hetpool/tokens.json --user alice\n"
    "Run 'hetpoolctl COMMAND --help' for a command's flags.\n";

// A command's lines of the overview (its synopsis and example), for `COMMAND --help` of commands
// without flags of their own; nullopt for the others (their FlagSet answers --help).
std::optional<std::string> CommandHelp(const std::string& command) {
  static const std::set<std::string> kWithoutFlags = {"get", "nodes", "fingerprints", "drain", "undrain"};
  if (!kWithoutFlags.contains(command)) return std::nullopt;
  std::string synopsis, example, more;
  bool in_command = false;
  for (absl::string_view line : absl::StrSplit(kUsage, '\n')) {
    if (absl::StartsWith(line, "  ") && !absl::StartsWith(line, "   ")) {
      in_command = absl::StartsWith(line, absl::StrCat("  ", command, " "));
      if (!in_command) continue;
      // "  get ID               hetpoolctl get job-000001   (what it shows)"
      const size_t at = line.find("hetpoolctl ");
      synopsis = std::string(absl::StripAsciiWhitespace(line.substr(0, at)));
      example = at == absl::string_view::npos ? "" : std::string(absl::StripAsciiWhitespace(line.substr(at)));
    } else if (in_command && absl::StartsWith(line, "   ")) {
      absl::StrAppend(&more, absl::StripAsciiWhitespace(line), "\n");
    } else {
      in_command = false;
    }
  }
  return absl::StrCat("hetpoolctl ", synopsis, "\n", more, "Example: ", example, "\n",
                      "Global flags (--server, --tls-ca, --token, --insecure, -o, --timeout) may come before or after it.\n");
}

// gRPC core prints its own lines on stderr ("E1130 ... Handshake failed"); the CLI says what went
// wrong itself (Client::Failed), so they only confuse.
void SilenceGrpcLogs(gpr_log_func_args*) {}

int Main(int argc, char** argv) {
  gpr_set_log_function(SilenceGrpcLogs);
  Globals globals;
  if (const char* env = getenv("HETPOOL_SERVER"); env && *env) globals.server = env;
  if (const char* env = getenv("HETPOOL_TOKEN"); env && *env) globals.token = env;
  if (const char* env = getenv("HETPOOL_TLS_CA"); env && *env) globals.tls.ca = env;
  if (const char* env = getenv("HETPOOL_INSECURE"); env && std::string(env) == "1") globals.insecure = true;
  std::vector<std::string> args(argv + 1, argv + argc);
  // A global flag at args[i]: how many words it takes (0: not one), or an error.
  std::string error;
  auto global = [&](size_t i) -> size_t {
    const std::string& a = args[i];
    auto value = [&](const std::string& name, size_t* used) -> std::optional<std::string> {
      if (a == name && i + 1 < args.size()) {
        *used = 2;
        return args[i + 1];
      }
      if (a.rfind(name + "=", 0) == 0) {
        *used = 1;
        return a.substr(name.size() + 1);
      }
      return std::nullopt;
    };
    size_t used = 0;
    if (a == "--insecure") {
      globals.insecure = true;
      return 1;
    } else if (auto server = value("--server", &used)) {
      globals.server = *server;
    } else if (auto token = value("--token", &used)) {
      globals.token = *token;
    } else if (auto token_file = value("--token-file", &used)) {
      auto text = ReadTextFile(*token_file);
      if (!text.ok()) error = std::string(text.status().message());
      else globals.token = std::string(absl::StripAsciiWhitespace(*text));
    } else if (auto ca = value("--tls-ca", &used)) {
      globals.tls.ca = *ca;
    } else if (auto cert = value("--tls-cert", &used)) {
      globals.tls.cert = *cert;
    } else if (auto key = value("--tls-key", &used)) {
      globals.tls.key = *key;
    } else if (auto output = value("-o", &used)) {
      globals.output = *output;
    } else if (auto long_output = value("--output", &used)) {
      globals.output = *long_output;
    } else if (auto timeout = value("--timeout", &used)) {
      auto d = ParseDurationFlag(*timeout);
      if (!d.ok()) error = std::string(d.status().message());
      else globals.timeout = *d;
    }
    return used;
  };
  // Global flags come before the command, and may follow it too ("get job-1 --insecure").
  size_t i = 0;
  for (; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      std::cout << kUsage;
      return 0;
    }
    const size_t used = global(i);
    if (!error.empty()) return Usage(error);
    if (used == 0) break;
    i += used - 1;
  }
  if (i >= args.size()) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string command = args[i];
  std::vector<std::string> rest;
  // After the command, its own flags win: wait's --timeout is how long to wait, not the RPC's.
  static const std::set<std::string> kOwnTimeout = {"wait"};
  for (size_t j = i + 1; j < args.size(); ++j) {
    const bool own = (args[j] == "--timeout" || args[j].rfind("--timeout=", 0) == 0) && kOwnTimeout.contains(command);
    const size_t used = own ? 0 : global(j);
    if (!error.empty()) return Usage(error);
    if (used == 0) {
      rest.push_back(args[j]);
      continue;
    }
    j += used - 1;
  }
  if (globals.output != "table" && globals.output != "json" && globals.output != "csv") {
    return Usage("-o takes table, json or csv");
  }
  if (globals.output == "csv" && command != "usage") return Usage("-o csv is for usage; use -o json");
  // Commands without flags of their own answer --help with their line of the overview.
  for (const auto& r : rest) {
    if (r != "-h" && r != "--help") continue;
    if (auto help = CommandHelp(command)) {
      std::cout << *help;
      return 0;
    }
  }
  Client client(globals);
  static const std::map<std::string, std::function<int(Client&, const std::vector<std::string>&)>> kCommands = {
      {"submit", Submit}, {"get", Get},     {"list", List},   {"cancel", Cancel},
      {"logs", Logs},     {"watch", WatchCmd}, {"wait", Wait}, {"nodes", Nodes},
      {"devices", Devices},    {"fingerprints", Fingerprints}, {"plan", PlanCommand}, {"admin", AdminCommand},
      {"usage", UsageCommand},
      {"drain", [](Client& c, const std::vector<std::string>& a) { return Drain(c, a, true); }},
      {"undrain", [](Client& c, const std::vector<std::string>& a) { return Drain(c, a, false); }},
  };
  auto it = kCommands.find(command);
  if (it == kCommands.end()) return Usage("unknown command '" + command + "'");
  return it->second(client, rest);
}

}  // namespace
}  // namespace hetpool::cli

int main(int argc, char** argv) { return hetpool::cli::Main(argc, argv); }
