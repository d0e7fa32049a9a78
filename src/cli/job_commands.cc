// hetpoolctl's job commands: submit, get, list, cancel, logs, watch and wait.
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "src/cli/command.h"
#include "src/cli/junit_report.h"
#include "src/cli/output.h"
#include "src/cli/terminal_output.h"
#include "src/cli/when.h"
#include "src/common/convert.h"
#include "src/common/job_file.h"
#include "src/common/json_keys.h"
#include "src/common/plan_convert.h"

namespace hetpool::cli {
namespace {

// An array's tasks by state: "300 tasks: 40 waiting, 10 running, 249 succeeded, 1 failed".
std::string ArrayTally(const pb::Job& job) {
  const pb::ArrayTasks& t = job.array_tasks();
  std::vector<std::string> parts;
  for (const auto& [n, what] : {std::pair{t.waiting(), "waiting"},
                                {t.running(), "running"},
                                {t.succeeded(), "succeeded"},
                                {t.failed(), "failed"},
                                {t.cancelled(), "cancelled"}}) {
    if (n > 0) parts.push_back(absl::StrCat(n, " ", what));
  }
  return absl::StrCat(t.count(), " tasks", parts.empty() ? "" : ": ", absl::StrJoin(parts, ", "));
}

std::string Placement(const pb::Job& job) {
  if (job.spec().has_array()) return ArrayTally(job);  // its tasks are placed, one by one
  std::vector<std::string> parts;
  for (const auto& p : job.placement()) {
    parts.push_back(p.device_ids_size()
                        ? absl::StrCat(p.node(), "[", absl::StrJoin(p.device_ids(), ","), "]",
                                       p.device_ids_size() > 1 ? absl::StrCat("(link ", p.link_score(), ")") : "")
                        : p.node());
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

// "2", or an elastic job's range "1-4".
std::string NodeCount(const pb::JobSpec& spec) {
  if (!spec.has_elastic_nnodes()) return absl::StrCat(spec.nnodes());
  return absl::StrCat(spec.elastic_nnodes().min(), "-", spec.elastic_nnodes().max());
}

// "2x4", "1-4x2" (elastic), "2x8+1x8" (role groups).
std::string ShortShape(const pb::JobSpec& spec) {
  if (spec.groups_size() == 0) return absl::StrCat(NodeCount(spec), "x", spec.devices_per_node());
  std::vector<std::string> groups;
  for (const auto& g : spec.groups()) groups.push_back(absl::StrCat(g.nnodes(), "x", g.devices_per_node()));
  return absl::StrJoin(groups, "+");
}

// "2 node(s)"; an elastic job's range and, once placed, how many it runs on now.
std::string NodesShape(const pb::Job& job) {
  const pb::JobSpec& spec = job.spec();
  if (!spec.has_elastic_nnodes()) return absl::StrCat(NodeCount(spec), " node(s)");
  std::string out = absl::StrCat(NodeCount(spec), " node(s), elastic");
  if (job.placement_size() > 0)
    absl::StrAppend(&out, " (", job.placement_size(), " in generation ", job.generation(), ")");
  return out;
}

// "2 node(s) x 4 device(s), 4 process(es) per node"; a job across vendors names its groups.
std::string Shape(const pb::Job& job) {
  const pb::JobSpec& spec = job.spec();
  if (spec.groups_size() == 0) {
    return absl::StrCat(NodesShape(job), " x ", spec.devices_per_node(), " device(s), ", spec.procs_per_node(),
                        " process(es) per node", spec.mixed_vendors() ? ", any vendors" : "");
  }
  std::vector<std::string> groups;
  for (const auto& g : spec.groups()) {
    std::vector<std::string> wants(g.requirements().vendors().begin(), g.requirements().vendors().end());
    groups.push_back(absl::StrCat(g.name(), " ", g.nnodes(), "x", g.devices_per_node(),
                                  wants.empty() ? "" : absl::StrCat(" ", absl::StrJoin(wants, "|"))));
  }
  return absl::StrCat("groups: ", absl::StrJoin(groups, " + "));
}

void PrintJobDetail(const pb::Job& job) {
  const auto& spec = job.spec();
  std::cout << "id:          " << job.id() << "\n"
            << "name:        " << spec.name() << "\n"
            << "user:        " << spec.user() << "\n"
            << "state:       " << JobStateName(job.state()) << "\n"
            << "reason:      " << job.reason() << (job.message().empty() ? "" : ": ") << job.message() << "\n"
            << "shape:       " << Shape(job) << "\n"
            << "generation:  " << job.generation() << " (restarts " << job.restart_count() << "/" << spec.max_restarts()
            << ")\n"
            << "vendor:      " << (job.vendor().empty() ? "-" : job.vendor()) << "\n"
            << "rendezvous:  " << (job.rendezvous_endpoint().empty() ? "-" : job.rendezvous_endpoint()) << "\n"
            << (job.collective().empty() ? ""
                                         : absl::StrCat("collective:  ", job.collective(), " (docs/mixed-vendor.md)\n"))
            << (job.batch_split().empty()
                    ? ""
                    : absl::StrCat("batch:       ", spec.global_batch(), " per step: ", job.batch_split(), "\n"))
            << "placement:   " << Placement(job) << "\n";
  if (spec.has_array()) {
    const pb::JobArraySpec& array = spec.array();
    std::cout << "array:       " << array.count() << " tasks, "
              << (array.max_running() > 0 ? absl::StrCat("at most ", array.max_running(), " running at once")
                                          : std::string("no limit on how many run at once"))
              << "; one task: hetpoolctl get " << job.id() << ".N (N from 0 to " << array.count() - 1 << ")\n";
  }
  if (job.has_array_task()) {
    std::cout << "array:       task " << job.array_task().index() << " of " << job.array_task().array() << " ("
              << job.array_task().count() << " tasks)\n";
  }
  for (const auto& p : job.placement()) {
    if (!p.waiting().empty() && !p.started())
      std::cout << "waiting:     on " << p.node() << ": " << p.waiting() << "\n";
    if (!p.confinement().empty()) std::cout << "confined:    on " << p.node() << ": " << p.confinement() << "\n";
    for (const auto& card : p.degraded_cards()) std::cout << "degraded:    on " << p.node() << ": " << card << "\n";
    for (const auto& leftover : p.card_leftovers()) {
      std::cout << "left on card: on " << p.node() << ", killed: " << leftover << "\n";
    }
    if (!p.output_lost().empty()) std::cout << "output lost: on " << p.node() << ": " << p.output_lost() << "\n";
  }
  if (job.preemption_count() > 0) {
    const pb::Preemption& p = job.last_preemption();
    std::cout << "preempted:   " << job.preemption_count() << " time(s); last: generation " << p.generation()
              << " by job " << p.by_job() << " (" << p.reason() << "), " << absl::StrFormat("%.2f", p.card_hours_lost())
              << " card-hours lost\n";
  }
  if (job.resize_count() > 0) {
    const pb::Preemption& r = job.last_resize();
    std::cout << "resized:     " << job.resize_count() << " time(s); last: generation " << r.generation() << " from "
              << r.from_nodes() << " to " << r.to_nodes() << " nodes"
              << (r.by_job().empty() ? "" : absl::StrCat(" for job ", r.by_job())) << " (" << r.reason() << "), "
              << absl::StrFormat("%.2f", r.card_hours_lost()) << " card-hours lost\n";
  }
  if (job.has_pending() && job.state() == pb::JOB_STATE_PENDING && !job.pending().preempting().empty()) {
    std::cout << "waiting:     for the jobs it preempted or shrinks to stop: " << job.pending().preempting() << "\n";
  } else if (job.has_pending() && job.state() == pb::JOB_STATE_PENDING) {
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
    // torchrun stops a node's other ranks at the first failure, hetpool the other nodes'.
    const int64_t ranks = int64_t{job.spec().nnodes()} * std::max(job.spec().procs_per_node(), 1);
    if (f.global_rank() >= 0 && ranks > 1 && job.spec().groups_size() == 0) {
      std::cout << "             the first rank to fail; the job's other ranks were stopped\n";
    }
    for (const auto& line : f.last_lines()) std::cout << "  | " << line << "\n";
  }
  if (job.has_plan()) {
    const pb::PlanRow& p = job.plan();
    std::cout << "plan:        " << p.label() << ": " << LayoutName(p) << ", micro-batch " << p.micro_batch() << "\n";
  }
  for (const auto& plan : job.launch_plan()) {
    std::cout << "launch on " << plan.node() << " (node rank " << plan.node_rank()
              << (plan.group().empty() ? "" : absl::StrCat(", group ", plan.group())) << ", " << plan.dist_backend()
              << (plan.inter_backend().empty() ? ""
                                               : absl::StrCat(" inside, ", plan.inter_backend(), " between groups"))
              << "/" << plan.torch_device() << "):\n  argv: " << absl::StrJoin(plan.argv(), " ") << "\n  env:";
    std::map<std::string, std::string> env(plan.env().begin(), plan.env().end());
    for (const auto& [k, v] : env) std::cout << " " << k << "=" << v;
    std::cout << "\n";
    if (!plan.cpus().empty()) {
      std::cout << "  near its cards: cores " << plan.cpus()
                << (plan.numa_nodes().empty() ? "" : absl::StrCat(", NUMA node(s) ", plan.numa_nodes())) << "\n";
    }
    if (plan.has_container()) {
      std::cout << "  image: " << plan.container().image() << "\n";
      for (const auto& placed : job.placement()) {
        if (placed.node() == plan.node() && placed.runtime_argv_size() > 0) {
          std::cout << "  runtime argv: " << absl::StrJoin(placed.runtime_argv(), " ") << "\n";
        }
      }
    }
  }
  std::cout << "events:\n";
  for (const auto& e : job.events()) {
    std::cout << "  " << absl::FormatTime("%H:%M:%S", FromProtoTime(e.time()), absl::LocalTimeZone()) << "  "
              << e.reason() << (e.message().empty() ? "" : ": ") << e.message() << "\n";
  }
}

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

// --- submit ------------------------------------------------------------------------------------

struct SubmitOptions {
  std::string file, request_id, array;
  bool skip_script_check = false;
  bool no_retry = false;
};

// --array: "0-999%50", "0-999", "1000%50" or "1000" (tasks are numbered from 0, as the job sees
// them in HETPOOL_ARRAY_INDEX).
absl::StatusOr<pb::JobArraySpec> ParseArray(absl::string_view text) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--array ", text, ": ", why));
  };
  pb::JobArraySpec array;
  absl::string_view range = text;
  if (const size_t percent = text.find('%'); percent != absl::string_view::npos) {
    int most = 0;
    if (!absl::SimpleAtoi(text.substr(percent + 1), &most) || most < 1) {
      return invalid("after % comes how many tasks may run at once, at least 1");
    }
    array.set_max_running(most);
    range = text.substr(0, percent);
  }
  int first = 0, last = 0;
  if (const size_t dash = range.find('-'); dash != absl::string_view::npos) {
    if (!absl::SimpleAtoi(range.substr(0, dash), &first) || !absl::SimpleAtoi(range.substr(dash + 1), &last)) {
      return invalid("expected FIRST-LAST[%MAX_RUNNING], e.g. 0-999%50");
    }
    if (first != 0) return invalid("tasks are numbered from 0: write 0-LAST");
    if (last < first) return invalid("LAST is below FIRST");
    array.set_count(last + 1);
  } else {
    int count = 0;
    if (!absl::SimpleAtoi(range, &count) || count < 1) {
      return invalid("expected a task count or FIRST-LAST, e.g. 1000 or 0-999%50");
    }
    array.set_count(count);
  }
  if (array.max_running() > array.count()) array.set_max_running(array.count());
  return array;
}

// The wait a refused submission is told ("...; retry in 4 ms", hetpoold's rate limiter), when it
// is told one.
std::optional<absl::Duration> RetryAfter(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return std::nullopt;
  const std::string& message = status.error_message();
  const size_t at = message.rfind("retry in ");
  int64_t ms = 0;
  if (at == std::string::npos) return std::nullopt;
  const std::string rest = message.substr(at + 9);
  if (!absl::EndsWith(rest, " ms") || !absl::SimpleAtoi(rest.substr(0, rest.size() - 3), &ms) || ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

void DeclareSubmit(FlagSet& flags, SubmitOptions* o) {
  flags.String("file", &o->file, "job file: protobuf JSON of hetpool.v1.JobSpec ('-' for stdin)");
  flags.Alias("-f", "file");
  flags.CompleteAs("file", ValueCompletion::kFile);
  flags.String("request-id", &o->request_id, "idempotency token: a retry with it returns the first job");
  flags.String("array", &o->array,
               "a job array (a sweep): 0-999 or 1000 runs the job 1,000 times as tasks of their own, each with "
               "HETPOOL_ARRAY_INDEX; %50 runs at most 50 at once (0-999%50)");
  flags.Bool("no-retry", &o->no_retry,
             "fail at once when hetpoold's rate limit refuses the submission (default: wait the time it names, "
             "up to a minute in all)");
  flags.Bool("skip-script-check", &o->skip_script_check,
             "do not check here that python.script exists under working_dir (the agent still does)");
}

int Submit(Client& client, const Invocation& in, const SubmitOptions& o) {
  if (o.file.empty()) return in.Usage("submit needs -f FILE");
  std::stringstream text;
  if (o.file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream file_in(o.file);
    if (!file_in) return Error(absl::NotFoundError(absl::StrCat(o.file, ": cannot be read")));
    text << file_in.rdbuf();
  }
  pb::SubmitJobRequest req;
  if (auto s = CheckNoDuplicateKeys(text.str()); !s.ok()) {
    return Error(absl::InvalidArgumentError(absl::StrCat(o.file, ": ", s.message())));
  }
  auto expanded = ExpandJobFileShorthands(text.str());
  if (!expanded.ok()) return Error(absl::InvalidArgumentError(absl::StrCat(o.file, ": ", expanded.status().message())));
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a misspelt field is an error, not silently dropped
  auto parsed = google::protobuf::util::JsonStringToMessage(*expanded, req.mutable_spec(), options);
  if (!parsed.ok()) {
    return Error(absl::InvalidArgumentError(absl::StrCat(o.file, ": ", parsed.message().as_string())));
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
  if (!o.skip_script_check) {
    if (auto s = CheckScriptVisibleHere(spec); !s.ok()) return Error(s);
  }
  if (!o.array.empty()) {
    auto array = ParseArray(o.array);
    if (!array.ok()) return in.Usage(std::string(array.status().message()));
    *spec.mutable_array() = *array;
  }
  req.set_request_id(o.request_id);
  pb::SubmitJobResponse resp;
  auto status = client.jobs().SubmitJob(client.Context().get(), req, &resp);
  // A burst of submissions (a CI loop) meets the per-user rate limit: the refusal names the wait,
  // and nothing was stored, so the same request is sent again after it.
  constexpr absl::Duration kMostWaited = absl::Minutes(1);
  absl::Duration waited;
  for (auto after = RetryAfter(status); after && !o.no_retry && waited + *after <= kMostWaited;
       after = RetryAfter(status)) {
    const absl::Duration wait = *after + absl::Milliseconds(1);
    absl::SleepFor(wait);
    waited += wait;
    resp.Clear();
    status = client.jobs().SubmitJob(client.Context().get(), req, &resp);
  }
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp.job());
  } else {
    std::cout << resp.job().id() << "\n";
  }
  return 0;
}

// --- get, list, cancel ---------------------------------------------------------------------------

int Get(Client& client, const Invocation& in, const NoOptions&) {
  pb::GetJobRequest req;
  req.set_job_id(in.operands[0]);
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

struct ListOptions {
  std::vector<std::string> states, labels;
  std::string user, since, until, page_token;
  int limit = 50;
  bool all = false, oldest_first = false;
};

void DeclareList(FlagSet& flags, ListOptions* o) {
  flags.List("state", &o->states, "only jobs in these states, lower case or as -o json prints them (JOB_STATE_FAILED)");
  flags.Values("state", {"pending", "scheduled", "running", "succeeded", "failed", "cancelled"});
  flags.String("user", &o->user, "only this user's jobs");
  flags.List("label", &o->labels, "only jobs with this label (k=v); repeatable");
  flags.String("since", &o->since, "only jobs submitted since: a span back from now (2h, 7d) or a date (2026-11-01)");
  flags.String("until", &o->until, "only jobs submitted before this (same forms as --since)");
  flags.Int("limit", &o->limit, "at most this many jobs (default 50); the last line says how to see more");
  flags.Bool("all", &o->all, "every matching job, page after page");
  flags.String("page-token", &o->page_token, "go on from where an earlier list stopped (its last line names it)");
  flags.Bool("oldest-first", &o->oldest_first, "oldest first (default: newest first)");
}

int List(Client& client, const Invocation& in, const ListOptions& o) {
  if (o.limit < 1) return in.Usage("--limit: must be at least 1");
  pb::ListJobsRequest req;
  req.set_user(o.user);
  req.set_newest_first(!o.oldest_first);
  req.set_page_token(o.page_token);
  for (const auto& s : o.states) {
    auto state = ParseJobState(s);
    if (!state.ok()) return Error(state.status());
    req.add_states(*state);
  }
  for (const auto& l : o.labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(l, absl::MaxSplits('=', 1));
    (*req.mutable_labels())[kv.first] = kv.second;
  }
  // A bound is set only when given (asking for the field creates it: "before 1970").
  const absl::Time now = absl::Now();
  auto since = ParseWhenFlag("--since", o.since, now);
  if (!since.ok()) return in.Usage(std::string(since.status().message()));
  auto until = ParseWhenFlag("--until", o.until, now);
  if (!until.ok()) return in.Usage(std::string(until.status().message()));
  if (*since) *req.mutable_submitted_after() = ToProtoTime(**since);
  if (*until) *req.mutable_submitted_before() = ToProtoTime(**until);
  // Pages until the limit (or, with --all, the end); a filter that matches little may bring
  // pages with few jobs or none, each with a token to go on.
  pb::ListJobsResponse all;
  do {
    if (!o.all) req.set_page_size(std::min(1000, o.limit - all.jobs_size()));
    pb::ListJobsResponse page;
    auto status = client.jobs().ListJobs(client.Context().get(), req, &page);
    if (!status.ok()) return client.Failed(status);
    for (auto& j : *page.mutable_jobs()) *all.add_jobs() = std::move(j);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty() && (o.all || all.jobs_size() < o.limit));
  all.set_next_page_token(req.page_token());
  if (client.json()) {
    std::cout << ToJson(all);
    return 0;
  }
  Table table({"ID", "NAME", "USER", "STATE", "SHAPE", "PLACEMENT", "AGE", "REASON"});
  for (const auto& j : all.jobs()) {
    table.Add({j.id(), j.spec().name(), j.spec().user(), std::string(JobStateName(j.state())), ShortShape(j.spec()),
               Placement(j), Age(j.created_at().seconds()), j.reason()});
  }
  std::cout << table.Render();
  // On stderr: a script reading the table (or wc -l) sees jobs only.
  if (!all.next_page_token().empty()) {
    std::cerr << "more: hetpoolctl list --page-token " << all.next_page_token() << " (the same filters), or --all\n";
  }
  return 0;
}

struct CancelOptions {
  std::string reason;
};

void DeclareCancel(FlagSet& flags, CancelOptions* o) {
  flags.String("reason", &o->reason, "recorded in the job's events");
}

int Cancel(Client& client, const Invocation& in, const CancelOptions& o) {
  pb::CancelJobRequest req;
  req.set_job_id(in.operands[0]);
  req.set_reason(o.reason);
  pb::Job job;
  auto status = client.jobs().CancelJob(client.Context().get(), req, &job);
  if (!status.ok()) return client.Failed(status);
  std::cout << job.id() << " " << JobStateName(job.state()) << "\n";
  return 0;
}

// --- logs ----------------------------------------------------------------------------------------

// Prints labelled log chunks so that one writer's line never runs into another's: a node's line
// still unfinished when another node's text comes is ended there, and its rest, when it comes,
// says whose it is; the output ends with a newline even when the job's last line had none.
class LabelledLogPrinter {
 public:
  explicit LabelledLogPrinter(std::ostream& out) : out_(out) {}
  void Print(const std::string& node, const std::string& data) {
    if (data.empty()) return;
    if (node != last_node_) {
      if (mid_line_) {
        out_ << "\n";
        unfinished_.insert(last_node_);
      }
      if (unfinished_.erase(node) > 0) out_ << "[" << node << ", continued] ";
    }
    out_ << data << std::flush;
    last_node_ = node;
    mid_line_ = data.back() != '\n';
  }
  void End() {
    if (mid_line_) out_ << "\n" << std::flush;
  }

 private:
  std::ostream& out_;
  std::string last_node_;
  bool mid_line_ = false;
  std::set<std::string> unfinished_;  // nodes whose last line was ended for another's text
};

struct LogsOptions {
  bool follow = false;
  std::string node;
  int rank = -1;
  bool raw = false;
};

void DeclareLogs(FlagSet& flags, LogsOptions* o) {
  flags.Bool("follow", &o->follow, "keep streaming until the job ends");
  flags.Alias("-f", "follow");
  flags.String("node", &o->node, "only this node's output");
  flags.CompleteAs("node", ValueCompletion::kNodeName);
  flags.Int("rank", &o->rank, "only this global rank's stdout (torchrun-tagged lines)");
  flags.Bool("raw", &o->raw,
             "the output as torchrun wrote it, byte for byte: [default<local rank>]: tags, its own log lines, and "
             "control characters a terminal would act on (without --raw they are shown escaped, \\x1b)");
}

int Logs(Client& client, const Invocation& in, const LogsOptions& o) {
  pb::GetJobLogsRequest req;
  req.set_job_id(in.operands[0]);
  req.set_node(o.node);
  req.set_follow(o.follow);
  req.set_raw(o.raw);
  if (in.flags.WasSet("rank")) req.set_rank(o.rank);
  // A stream that ends UNAVAILABLE (a failover, a restart) is asked again; each node's output
  // starts over, so what was shown of each is skipped (the same generation's log is the same).
  std::map<std::string, size_t> shown;
  LabelledLogPrinter printer(std::cout);
  absl::Time unavailable_since = absl::InfiniteFuture();
  bool had_answers = false;
  grpc::Status status;
  do {
    std::map<std::string, size_t> seen;  // bytes of each node's output in this stream
    auto ctx = client.Context(o.follow ? absl::InfiniteDuration() : absl::ZeroDuration());
    auto reader = client.jobs().GetJobLogs(ctx.get(), req);
    pb::LogChunk chunk;
    while (reader->Read(&chunk)) {
      had_answers = true;
      unavailable_since = absl::InfiniteFuture();
      size_t& at = seen[chunk.node()];
      size_t& done = shown[chunk.node()];
      const size_t skip = done > at ? std::min(done - at, chunk.data().size()) : 0;
      at += chunk.data().size();
      if (skip == chunk.data().size()) continue;
      const std::string data = chunk.data().substr(skip);
      done += data.size();
      if (o.raw) {
        RawStdout() << data << std::flush;
      } else {
        printer.Print(chunk.node(), data);
      }
    }
    status = reader->Finish();
    if (!o.follow || !client.ShouldRetry(status, had_answers, &unavailable_since)) break;
    client.Reconnect();
  } while (true);
  if (!o.raw) printer.End();
  return status.ok() ? 0 : client.Failed(status);
}

// --- watch and wait ------------------------------------------------------------------------------

// Streams the job's changes to `on_update`; `last` is the job as last seen. Rides through a
// failover or a daemon restart (Client::ShouldRetry): every stream starts with the job as it is
// then, so a caller that counts what it has shown shows nothing twice.
grpc::Status Watch(Client& client, const std::string& id, absl::Duration timeout,
                   const std::function<void(const pb::WatchJobResponse&)>& on_update, pb::Job* last) {
  pb::WatchJobRequest req;
  req.set_job_id(id);
  const absl::Time deadline = timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  absl::Time unavailable_since = absl::InfiniteFuture();
  bool had_answers = false;
  while (true) {
    const absl::Duration left = deadline == absl::InfiniteFuture() ? absl::InfiniteDuration() : deadline - absl::Now();
    auto ctx = client.Context(left > absl::ZeroDuration() ? left : absl::Milliseconds(1));
    auto reader = client.jobs().WatchJob(ctx.get(), req);
    pb::WatchJobResponse update;
    while (reader->Read(&update)) {
      had_answers = true;
      unavailable_since = absl::InfiniteFuture();
      *last = update.job();
      on_update(update);
    }
    grpc::Status status = reader->Finish();
    if (!client.ShouldRetry(status, had_answers, &unavailable_since) || absl::Now() >= deadline) return status;
    client.Reconnect();
  }
}

// "SIGSEGV" -> 11; 0 when unknown.
int SignalNumber(const std::string& name) {
  for (int n = 1; n < 65; ++n) {
    const char* abbrev = sigabbrev_np(n);
    if (abbrev != nullptr && name == absl::StrCat("SIG", abbrev)) return n;
  }
  return 0;
}

// What `wait` exits with for a job that ended (the README's table of exit codes).
int WaitExitCode(const pb::Job& job, bool job_exit_code) {
  switch (job.state()) {
    case pb::JOB_STATE_SUCCEEDED: return 0;
    case pb::JOB_STATE_CANCELLED: return kExitJobCancelled;
    default: break;
  }
  if (job.failure_origin() == pb::FAILURE_ORIGIN_INFRASTRUCTURE) return kExitInfrastructure;
  const pb::RankFailure& f = job.failure();
  if (job_exit_code && f.launch_failure().empty() && f.global_rank() >= 0) {
    // The script's own status, as a shell reports it: 128 + N for a signal.
    if (!f.signal().empty()) {
      const int number = SignalNumber(f.signal());
      if (number > 0) return 128 + number;
    } else if (f.exit_code() > 0 && f.exit_code() < 256) {
      // A code hetpoolctl gives for itself (could not do it, usage, the pool's failure,
      // cancelled, timed out) would be read as that: it becomes 100 + the code. Python's
      // uncaught exception is 1, so most failing scripts read as 101.
      const int code = f.exit_code();
      const bool ours = code == kExitError || code == kExitUsage || code == kExitInfrastructure ||
                        code == kExitJobCancelled || code == kExitTimeout;
      return ours ? 100 + code : code;
    }
  }
  return kExitJobFailed;
}

struct WatchOptions {
  bool job_exit_code = false;
};

void DeclareWatch(FlagSet& flags, WatchOptions* o) {
  flags.Bool("job-exit-code", &o->job_exit_code, "as wait --job-exit-code");
}

int WatchJob(Client& client, const Invocation& in, const WatchOptions& o) {
  int printed = 0;
  pb::Job last;
  // Every event not yet shown, from the first (the stream starts with the job as it is now).
  auto status = Watch(
      client, in.operands[0], absl::InfiniteDuration(),
      [&](const pb::WatchJobResponse& u) {
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
          std::cout << absl::FormatTime("%H:%M:%S", FromProtoTime(events[i].time()), absl::LocalTimeZone()) << "  "
                    << JobStateName(events[i].state()) << "  " << events[i].reason()
                    << (events[i].message().empty() ? "" : ": ") << events[i].message() << "\n"
                    << std::flush;
        }
        printed = events.size();
      },
      &last);
  if (!status.ok()) return client.Failed(status);
  return WaitExitCode(last, o.job_exit_code);
}

struct WaitOptions {
  absl::Duration timeout = absl::Seconds(300);
  bool job_exit_code = false;
  std::string junit;
};

void DeclareWait(FlagSet& flags, WaitOptions* o) {
  flags.Duration("timeout", &o->timeout, "give up after this long (default 300s)");
  flags.String("junit", &o->junit, "also write the outcome as a JUnit XML report to FILE (CI test results)");
  flags.CompleteAs("junit", ValueCompletion::kFile);
  flags.Bool(
      "job-exit-code", &o->job_exit_code,
      "when the job's own program failed, exit with the failing rank's exit code (128+N for signal N) instead of 3; "
      "a code hetpoolctl uses itself (1, 2, 4, 5, 124) becomes 100 + it (Python's uncaught exception: 101)");
}

int Wait(Client& client, const Invocation& in, const WaitOptions& o) {
  pb::Job last;
  auto status = Watch(
      client, in.operands[0], o.timeout, [](const pb::WatchJobResponse&) {}, &last);
  const bool timed_out = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (!o.junit.empty() && (status.ok() || (timed_out && !last.id().empty()))) {
    if (auto s = WriteJunitReport(o.junit, last, timed_out); !s.ok()) return Error(s);
  }
  if (timed_out) {
    std::cerr << "hetpoolctl: timed out after " << absl::FormatDuration(o.timeout) << "; job is "
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
  return WaitExitCode(last, o.job_exit_code);
}

}  // namespace

std::vector<CommandEntry> JobCommands() {
  return {
      {.name = "submit",
       .synopsis = "-f FILE",
       .summary = "submit a job from a job file (JSON of hetpool.v1.JobSpec); prints its id",
       .examples = {"hetpoolctl submit -f deploy/examples/ddp-job.json"},
       .make = Make<SubmitOptions>(DeclareSubmit, Submit)},
      {.name = "get",
       .synopsis = "ID",
       .summary = "one job: state, why it waits or failed, placement, launch plan, events",
       .examples = {"hetpoolctl get job-000001"},
       .operands = Operands::kJobId,
       .make = Make<NoOptions>(nullptr, Get)},
      {.name = "list",
       .summary = "jobs, newest first, 50 at a time, by state, user, label and submission time",
       .examples = {"hetpoolctl list --state running --label team=nlp",
                    "hetpoolctl list --user alice --since 2d --all"},
       .make = Make<ListOptions>(DeclareList, List)},
      {.name = "cancel",
       .synopsis = "ID",
       .summary = "cancel a job (its processes get SIGTERM, then SIGKILL)",
       .examples = {"hetpoolctl cancel job-000001 --reason 'wrong data'"},
       .operands = Operands::kJobId,
       .make = Make<CancelOptions>(DeclareCancel, Cancel)},
      {.name = "logs",
       .synopsis = "ID",
       .summary = "a job's output, each line labelled with its node and global rank",
       .details = "Each line starts with where it came from: [node rGLOBAL] for a rank's stdout, [node] for\n"
                  "the rest (stderr, which torchrun does not tag); torchrun's INFO/WARNING lines are left out.",
       .examples = {"hetpoolctl logs job-000001 -f --rank 0"},
       .operands = Operands::kJobId,
       .make = Make<LogsOptions>(DeclareLogs, Logs)},
      {.name = "watch",
       .synopsis = "ID",
       .summary = "each event of a job until it ends, then exit like wait",
       .details = "With -o json: JSON Lines, one hetpool.v1.WatchEvent per line (the job's id, generation, event).",
       .examples = {"hetpoolctl watch job-000001", "hetpoolctl watch job-000001 -o json | jq -r .event.reason"},
       .operands = Operands::kJobId,
       .make = Make<WatchOptions>(DeclareWatch, WatchJob)},
      {.name = "wait",
       .synopsis = "ID",
       .summary = "wait for a job to end; the exit status says how it ended",
       .details = "Exit status: 0 SUCCEEDED, 3 FAILED by the job itself (its program failed, its script or\n"
                  "working dir is missing), 4 FAILED by the infrastructure (nodes or processes lost, a node\n"
                  "could not launch it), 5 CANCELLED, 124 timeout, 1 hetpoolctl error, 2 usage. With\n"
                  "--job-exit-code a failing rank's own code (1, 2, 4, 5 and 124 become 101, 102, 104, 105, 224).",
       .examples = {"hetpoolctl wait job-000001 --timeout 10m --job-exit-code --junit report.xml"},
       .operands = Operands::kJobId,
       .make = Make<WaitOptions>(DeclareWait, Wait)},
  };
}

}  // namespace hetpool::cli
