#include "src/daemon/state/agent_reconciler.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/common/torchrun_lines.h"
#include "src/common/utf8.h"
#include "src/daemon/state/job_validation.h"
#include "src/daemon/state/state_observer.h"

namespace hetpool::daemon {

AgentReconciler::AgentReconciler(JobTable& jobs, NodeRegistry& nodes, Wakeups& wakeups, LeaseOptions leases,
                                 HardwareFaultOptions hardware)
    : jobs_(jobs), nodes_(nodes), wakeups_(wakeups), leases_(leases), suspicion_(hardware) {}

void AgentReconciler::ReleaseClaims(JobEntry& entry, const std::string& reason, absl::Duration grace) {
  pb::Job ended;  // a job that just failed or was cancelled is kept as bytes: not parsed back in
  const pb::Job& job = entry.Read(ended);
  const JobGen key{job.id(), job.generation()};
  for (const auto& p : job.placement()) {
    NodeEntry* node = nodes_.Find(p.node());
    if (node == nullptr) continue;
    auto claim = node->claims.find(key);
    if (claim == node->claims.end() || !claim->second.desired) continue;
    nodes_.BumpOrders(*node);
    claim->second.desired = false;
    claim->second.kill_reason = reason;
    claim->second.kill_grace = grace;
    claim->second.undesired_at_version = node->orders_version;
  }
  wakeups_.CapacityChanged();
}

absl::Status AgentReconciler::FailOrRestart(JobEntry& entry, pb::Job job, const std::string& reason,
                                            const std::string& message, pb::FailureOrigin origin, bool restartable) {
  if (restartable && job.restart_count() < job.spec().max_restarts()) {
    job.set_restart_count(job.restart_count() + 1);
    job.set_state(pb::JOB_STATE_PENDING);
    job.set_reason("Restarting");
    job.set_message(absl::StrCat(message, "; restart ", job.restart_count(), " of ", job.spec().max_restarts()));
    jobs_.AddEvent(job, reason, job.message());
  } else {
    job.set_state(pb::JOB_STATE_FAILED);
    job.set_reason(reason);
    job.set_message(message);
    job.set_failure_origin(origin);
    *job.mutable_finished_at() = ToProtoTime(jobs_.Now());
    jobs_.AddEvent(job, reason, message);
  }
  if (auto s = jobs_.Commit(entry, std::move(job)); !s.ok()) return s;
  ReleaseClaims(entry, absl::StrCat("gang stopped: ", message));
  return absl::OkStatus();
}

absl::Status AgentReconciler::OnRendezvousPortTaken(JobEntry& entry, pb::Job job, const std::string& node,
                                                    const std::string& message) {
  // Another process listens on the port this generation was given: not the job's doing. The port
  // is skipped on that host for a while and the job goes back to the queue at once, spending no
  // restart; with every port of the range taken, it fails as the pool's (exit 4).
  const std::string& endpoint = job.rendezvous_endpoint();
  nodes_.NoteForeignPort(endpoint, jobs_.Now());
  const std::string said = absl::StrCat("node ", node, ": ", message);
  const absl::StatusOr<int> another = nodes_.PickRendezvousPort(endpoint.substr(0, endpoint.rfind(':')), jobs_.Now());
  if (!another.ok()) {
    return FailOrRestart(entry, std::move(job), "RendezvousPortsExhausted",
                         absl::StrCat(said, "; ", another.status().message()), pb::FAILURE_ORIGIN_INFRASTRUCTURE,
                         /*restartable=*/false);
  }
  return StopGeneration(entry, std::move(job), "RendezvousPortTaken",
                        absl::StrCat(said, "; requeued on another port without spending a restart"),
                        absl::StrCat("gang stopped: ", said));
}

absl::Status AgentReconciler::Preempt(JobEntry& entry, pb::Preemption preemption) {
  pb::Job job = entry.job();
  preemption.set_generation(job.generation());
  *preemption.mutable_at() = ToProtoTime(jobs_.Now());
  const bool moved = preemption.defragmentation();
  const std::string stopped_by = absl::StrCat(moved ? "moved for job " : "preempted by job ", preemption.by_job());
  const std::string message =
      absl::StrCat(stopped_by, " (", preemption.reason(), "); ", absl::StrFormat("%.2f", preemption.card_hours_lost()),
                   " card-hours since its last checkpoint lost");
  job.set_preemption_count(job.preemption_count() + 1);
  *job.mutable_last_preemption() = preemption;
  const absl::Duration grace = FromProtoDuration(job.spec().preemption_grace());
  return StopGeneration(entry, std::move(job), moved ? kRestartMoved : kRestartPreempted, message, stopped_by, grace);
}

absl::Status AgentReconciler::Resize(JobEntry& entry, pb::Preemption resize) {
  pb::Job job = entry.job();
  resize.set_generation(job.generation());
  *resize.mutable_at() = ToProtoTime(jobs_.Now());
  const std::string resized = absl::StrCat(resize.to_nodes() > resize.from_nodes() ? "growing" : "shrinking", " from ",
                                           resize.from_nodes(), " to ", resize.to_nodes(), " nodes");
  const std::string stopped_by =
      resize.by_job().empty() ? resized : absl::StrCat(resized, " for job ", resize.by_job());
  const std::string message =
      absl::StrCat(stopped_by, " (", resize.reason(), "); ", absl::StrFormat("%.2f", resize.card_hours_lost()),
                   " card-hours since its last checkpoint lost");
  job.set_resize_count(job.resize_count() + 1);
  *job.mutable_last_resize() = resize;
  const absl::Duration grace = FromProtoDuration(job.spec().preemption_grace());
  return StopGeneration(entry, std::move(job), kRestartResized, message, stopped_by, grace);
}

absl::Status AgentReconciler::StopGeneration(JobEntry& entry, pb::Job job, const char* reason,
                                             const std::string& message, const std::string& kill_reason,
                                             absl::Duration grace) {
  job.set_state(pb::JOB_STATE_PENDING);
  job.set_reason(reason);
  job.set_message(message);
  jobs_.AddEvent(job, reason, message);
  if (auto s = jobs_.Commit(entry, std::move(job)); !s.ok()) return s;
  ReleaseClaims(entry, kill_reason, grace);
  return absl::OkStatus();
}

namespace {

// An agent's words on a process ("exec failed: ...") are kept to this many bytes.
constexpr size_t kMaxAgentMessageBytes = 1024;

// An agent's report is cut to what an agent keeps (torchrun_lines.h), so a faulty one cannot
// make every job it ran carry megabytes into the store and every watcher; and it is made valid
// UTF-8, which the store's and watchers' protobuf parsers insist on.
void CutToBounds(pb::RankFailure& f) {
  while (static_cast<size_t>(f.last_lines_size()) > kMaxLastLines)
    f.mutable_last_lines()->erase(f.mutable_last_lines()->begin());
  for (std::string& line : *f.mutable_last_lines()) line = ValidUtf8(line, kMaxLineBytes);
  for (std::string* word : {f.mutable_signal(), f.mutable_launch_failure()}) *word = ValidUtf8(*word, 64);
}

// Launch failures the job made (its script or working dir): another try fails the same way.
// A mount outside what the node lets jobs mount is the job's spec too (another node has the
// same rule).
bool JobsOwnLaunchFailure(const std::string& kind) {
  return kind == "ScriptNotFound" || kind == "WorkingDirNotFound" || kind == "MountRefused";
}

// "rank 2 on node-b exited with code 3: ValueError: bad batch size", or the node's own words when
// torchrun's report named no rank.
std::string DescribeFailure(const std::string& node, int exit_code, const std::string& message,
                            const pb::RankFailure& f) {
  std::string out;
  if (f.out_of_memory_mib() > 0) {  // the kernel's word, surer than how torchrun saw the rank end
    const std::string who = f.global_rank() >= 0 ? absl::StrCat("rank ", f.global_rank(), " on ", node)
                                                 : absl::StrCat("a process on ", node);
    out = absl::StrCat(who, " was killed: out of memory at its ", f.out_of_memory_mib(), " MiB host memory ",
                       f.memory_asked() ? "ask" : "share (it asked for none: its cards' share of the node)");
  } else if (f.global_rank() >= 0) {
    out = f.signal().empty() ? absl::StrCat("rank ", f.global_rank(), " on ", node, " exited with code ", f.exit_code())
                             : absl::StrCat("rank ", f.global_rank(), " on ", node, " was killed by ", f.signal());
  } else {
    out = absl::StrCat("node ", node, " exited with code ", exit_code, message.empty() ? "" : ": ", message);
  }
  if (f.last_lines_size() > 0) absl::StrAppend(&out, ": ", f.last_lines(f.last_lines_size() - 1));
  return out;
}

// Takes the agent's word on lost output into the placement, with an event the first time and
// whenever it changes (the agent's text grows as the disk fills again). True if it changed.
bool NoteOutputLost(JobTable& jobs, pb::Job& job, pb::NodePlacement& p, const pb::ProcessStatus& report) {
  const std::string lost = ValidUtf8(report.output_lost(), kMaxAgentMessageBytes);
  if (lost.empty() || lost == p.output_lost()) return false;
  p.set_output_lost(lost);
  jobs.AddEvent(job, "OutputLost", absl::StrCat("node ", p.node(), ": ", lost));
  return true;
}

// What the job left holding its cards, which the agent killed: kept on the placement (bounded:
// the agent's words are not trusted for size) and said once in an event.
void NoteCardLeftovers(JobTable& jobs, pb::Job& job, pb::NodePlacement& p, const pb::ProcessStatus& report) {
  if (report.card_leftovers().empty() || !p.card_leftovers().empty()) return;
  constexpr int kMaxLeftovers = 16;
  for (int i = 0; i < report.card_leftovers_size() && i < kMaxLeftovers; ++i) {
    p.add_card_leftovers(ValidUtf8(report.card_leftovers(i), kMaxAgentMessageBytes));
  }
  jobs.AddEvent(job, "CardLeftoversKilled",
                absl::StrCat("node ", p.node(),
                             ": killed what the job left holding its cards: ", absl::StrJoin(p.card_leftovers(), "; "),
                             report.card_leftovers_size() > kMaxLeftovers ? "; ..." : ""));
}

// What the NodeStarted event says: "node a started pid 42; adapted: ...; confined: cgroup v1 ...".
std::string StartedWords(const std::string& node, const pb::ProcessStatus& r, const std::string& confinement) {
  return absl::StrCat("node ", node, " started pid ", r.pid(), r.note().empty() ? "" : "; ", r.note(),
                      confinement.empty() ? "; unconfined" : absl::StrCat("; confined: ", confinement));
}

}  // namespace

absl::Status AgentReconciler::OnNodeExited(JobEntry& entry, const std::string& node, const pb::ProcessStatus& report) {
  pb::Job job = entry.job();
  pb::NodePlacement* p = PlacementOn(job, node);
  if (p == nullptr) return absl::OkStatus();
  NoteOutputLost(jobs_, job, *p, report);
  if (p->confinement().empty()) p->set_confinement(ValidUtf8(report.confinement(), kMaxAgentMessageBytes));
  // A process that ended before any report saw it run (a short job started directly, its exit
  // reported at once) still says how it started: its note (adapted, checks passed, warnings).
  if (!p->started() && report.pid() > 0 && report.rank_failure().launch_failure().empty()) {
    jobs_.AddEvent(job, "NodeStarted", StartedWords(node, report, p->confinement()));
  }
  if (report.strays_killed() > 0) {
    p->set_strays_killed(report.strays_killed());
    jobs_.AddEvent(job, "StraysKilled",
                   absl::StrCat("node ", node, ": ", report.strays_killed(),
                                " process(es) the job left running after its torchrun exited were killed"));
  }
  NoteCardLeftovers(jobs_, job, *p, report);
  p->set_started(true);
  p->set_exited(true);
  p->set_exit_code(report.exit_code());
  const std::string message = ValidUtf8(report.message(), kMaxAgentMessageBytes);
  p->set_exit_message(message);
  if (report.exit_code() != 0) {
    pb::RankFailure failure = report.rank_failure();
    if (!report.has_rank_failure()) {  // torchrun killed, or an agent that does not read its report
      failure.set_global_rank(-1);
      failure.set_local_rank(-1);
      failure.set_exit_code(report.exit_code());
    }
    failure.set_node(node);
    CutToBounds(failure);
    const std::string& launch = failure.launch_failure();
    *job.mutable_failure() = failure;
    if (JobsOwnLaunchFailure(launch)) {
      // The script or working dir is missing for the job's account: fail now, spend no restart.
      return FailOrRestart(entry, std::move(job), launch, absl::StrCat("node ", node, ": ", message),
                           pb::FAILURE_ORIGIN_JOB, /*restartable=*/false);
    }
    if (launch == "RendezvousPortTaken") return OnRendezvousPortTaken(entry, std::move(job), node, message);
    if (launch == "PreflightFailed") {
      // The node's health check failed before the job ran (hetpool-agent --preflight): the node,
      // or the cards its check named, is out of service already; the job goes elsewhere at once.
      return RequeueForHardware(entry, std::move(job), node, {}, "pre-flight health check failed", message);
    }
    if (!launch.empty()) {  // the node's doing (no torchrun, no account): another node may do
      return FailOrRestart(entry, std::move(job), kRestartLaunchFailed, absl::StrCat("node ", node, ": ", message),
                           pb::FAILURE_ORIGIN_INFRASTRUCTURE);
    }
    const std::vector<std::string> lines(failure.last_lines().begin(), failure.last_lines().end());
    if (auto evidence = FindHardwareSignature(lines)) return OnHardwareFailure(entry, std::move(job), node, *evidence);
    NoteEarlyFailure(job, node);
    std::string described = DescribeFailure(node, report.exit_code(), message, failure);
    // Most scripts save their checkpoints in the working dir: one the account cannot write is
    // the likely cause, said with the failure (the node noticed at launch; it may be innocent).
    if (const std::string unwritable = ValidUtf8(report.working_dir_unwritable(), kMaxAgentMessageBytes);
        !unwritable.empty()) {
      absl::StrAppend(&described, " (on ", node, ", ", unwritable, ")");
    }
    return FailOrRestart(entry, std::move(job), kRestartNonZeroExit, described, pb::FAILURE_ORIGIN_JOB);
  }
  jobs_.AddEvent(job, "NodeSucceeded", absl::StrCat("node ", node, " finished"));
  const bool all_done = std::all_of(job.placement().begin(), job.placement().end(),
                                    [](const pb::NodePlacement& q) { return q.exited(); });
  if (all_done) {
    job.set_state(pb::JOB_STATE_SUCCEEDED);
    job.set_reason("Succeeded");
    job.set_message("every node exited with code 0");
    *job.mutable_finished_at() = ToProtoTime(jobs_.Now());
    jobs_.AddEvent(job, "Succeeded", job.message());
    VindicateEarlyFailures(job);
    wakeups_.CapacityChanged();
  }
  return jobs_.Commit(entry, std::move(job));
}

void AgentReconciler::OnNodeWaiting(JobEntry& entry, const std::string& node, const pb::ProcessStatus& r) {
  const std::string why = ValidUtf8(r.waiting(), kMaxAgentMessageBytes);
  const pb::NodePlacement* now = PlacementOn(entry.job(), node);
  if (now == nullptr || now->started() || now->waiting() == why) return;
  pb::Job next = entry.job();
  PlacementOn(next, node)->set_waiting(why);
  jobs_.AddEvent(next, "NodeWaiting", absl::StrCat("node ", node, " holds the launch back: ", why));
  jobs_.Commit(entry, std::move(next)).IgnoreError();  // retried with the next report
}

void AgentReconciler::OnNodeRunning(JobEntry& entry, const std::string& node, const pb::ProcessStatus& r) {
  pb::Job next = entry.job();
  pb::NodePlacement* p = PlacementOn(next, node);
  if (p == nullptr) return;
  const bool ranks_news = p->global_ranks_size() == 0 && r.global_ranks_size() > 0;
  if (ranks_news) *p->mutable_global_ranks() = r.global_ranks();
  const bool lost_news = NoteOutputLost(jobs_, next, *p, r);
  const bool vindicated = VindicateEarlyFailures(next);
  if (!p->started()) {
    p->set_started(true);
    p->clear_waiting();
    const std::string confinement = ValidUtf8(r.confinement(), kMaxAgentMessageBytes);
    p->set_confinement(confinement);
    // In an image: the runtime's command line as the agent ran it (bounded like its messages).
    size_t argv_bytes = 0;
    for (const auto& arg : r.runtime_argv()) {
      if (p->runtime_argv_size() >= 512 || (argv_bytes += arg.size()) > 64 * 1024) break;
      p->add_runtime_argv(ValidUtf8(arg, kMaxAgentMessageBytes));
    }
    for (const auto& plan : next.launch_plan()) {
      if (plan.node() == node && plan.has_container()) p->set_image(plan.container().image());
    }
    jobs_.AddEvent(next, "NodeStarted", StartedWords(node, r, confinement));
    const bool all_started = std::all_of(next.placement().begin(), next.placement().end(),
                                         [](const pb::NodePlacement& q) { return q.started(); });
    if (all_started && next.state() == pb::JOB_STATE_SCHEDULED) {
      next.set_state(pb::JOB_STATE_RUNNING);
      next.set_reason("Running");
      next.set_message("every node started");
      *next.mutable_started_at() = ToProtoTime(jobs_.Now());
      jobs_.AddEvent(next, "Running", next.message());
    }
  } else if (!ranks_news && !lost_news && !vindicated) {
    return;
  }
  jobs_.Commit(entry, std::move(next)).IgnoreError();  // retried with the next report
}

void AgentReconciler::ApplyProcessReports(NodeEntry& node,
                                          const google::protobuf::RepeatedPtrField<pb::ProcessStatus>& reports,
                                          bool registering) {
  const std::string& node_name = node.record.name();
  std::set<JobGen> reported;
  for (const auto& r : reports) {
    const JobGen key{r.job_id(), r.generation()};
    reported.insert(key);
    auto claim_it = node.claims.find(key);
    if (claim_it == node.claims.end()) {
      if (r.running()) {
        // A process the daemon does not want here (stale generation, or a job that ended while
        // the daemon was down): hold its devices and order it stopped.
        nodes_.BumpOrders(node);
        Claim& claim = node.claims[key];
        claim.device_ids.assign(r.device_ids().begin(), r.device_ids().end());
        if (const JobEntry* job = jobs_.Find(r.job_id())) {  // it holds what its job asks
          claim.cpu_milli = HostCpuMilliPerNode(job->job().spec());
          claim.host_memory_mib = HostMemoryMibPerNode(job->job().spec());
        }
        claim.desired = false;
        claim.kill_reason = "not assigned to this node by the daemon";
        claim.undesired_at_version = node.orders_version;
      }
      continue;
    }
    JobEntry* entry = jobs_.Find(r.job_id());
    if (!claim_it->second.desired || entry == nullptr) {
      if (r.exited()) {
        node.claims.erase(claim_it);
        nodes_.BumpOrders(node);
        wakeups_.CapacityChanged();
      }
      continue;
    }
    // A report whose change cannot be stored is not applied: the claim stays, and the agent
    // reports the same again with its next heartbeat (it reports an exit until told to forget).
    if (r.exited()) {
      if (!OnNodeExited(*entry, node_name, r).ok()) continue;
      node.claims.erase(claim_it);
      nodes_.BumpOrders(node);
      wakeups_.CapacityChanged();
    } else if (r.running()) {
      OnNodeRunning(*entry, node_name, r);
    } else if (!r.waiting().empty()) {
      OnNodeWaiting(*entry, node_name, r);
    }
  }
  ForgetUnreported(node, reported, registering);
}

void AgentReconciler::ForgetUnreported(NodeEntry& node, const std::set<JobGen>& reported, bool registering) {
  const std::string& node_name = node.record.name();
  for (auto it = node.claims.begin(); it != node.claims.end();) {
    const auto& [key, claim] = *it;
    if (reported.contains(key)) {
      ++it;
      continue;
    }
    if (!claim.desired) {
      // Gone once the agent has acted on the kill (or never started it).
      if (registering || node.applied_version >= claim.undesired_at_version) {
        it = node.claims.erase(it);
        wakeups_.CapacityChanged();
        continue;
      }
      ++it;
      continue;
    }
    JobEntry* entry = jobs_.Find(key.first);
    const pb::NodePlacement* p = entry == nullptr ? nullptr : PlacementOn(entry->job(), node_name);
    const bool should_know =
        registering ? (p != nullptr && p->started()) : node.applied_version >= claim.created_at_version;
    if (!should_know || p == nullptr) {
      ++it;
      continue;
    }
    // The agent acted on the launch (or ran it before) but has no record: the processes are gone.
    // Unstored, the claim stays and the next report tries again.
    if (!FailOrRestart(*entry, entry->job(), kRestartProcessLost,
                       absl::StrCat("node ", node_name, " no longer has the job's processes"),
                       pb::FAILURE_ORIGIN_INFRASTRUCTURE)
             .ok()) {
      ++it;
      continue;
    }
    it = node.claims.erase(it);
    wakeups_.CapacityChanged();
  }
}

absl::Time AgentReconciler::ExpireLeases(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto& [name, node] : nodes_.entries()) {
    const absl::Duration silent = now - node.lease_renewed_at;
    if (!node.ready && node.claims.empty()) continue;
    if (silent <= leases_.lease_ttl) {
      next = std::min(next, node.lease_renewed_at + leases_.lease_ttl);
      continue;
    }
    // Past the lease: no new work, and the agent must register again and report what still runs.
    // Its jobs keep their claims: the agent keeps them running through a control-plane outage.
    if (node.ready) {
      spdlog::warn("node {}: lease lapsed, now NotReady; its jobs count as running for {} more", name,
                   absl::FormatDuration(leases_.orphan_grace));
    }
    nodes_.EndSession(node);
    // Past the orphan grace as well, the agent and its fence watchdog have stopped the processes
    // (they stop them at the grace after their last answer, which came before this node's last
    // heartbeat): only now may the jobs run elsewhere.
    if (silent <= leases_.lease_ttl + leases_.orphan_grace) {
      next = std::min(next, node.lease_renewed_at + leases_.lease_ttl + leases_.orphan_grace);
      continue;
    }
    std::vector<JobGen> lost;
    for (const auto& [key, claim] : node.claims) {
      if (claim.desired) lost.push_back(key);
    }
    // Claims go with the node, except those of jobs whose failure the store did not take: they
    // keep the node in this loop, so the next look tries again.
    std::set<JobGen> unstored;
    for (const auto& key : lost) {
      JobEntry* entry = jobs_.Find(key.first);
      if (entry == nullptr || entry->job().generation() != key.second) continue;
      if (!FailOrRestart(*entry, entry->job(), kRestartNodeLost,
                         absl::StrCat("node ", name, " stopped renewing its lease"), pb::FAILURE_ORIGIN_INFRASTRUCTURE)
               .ok()) {
        unstored.insert(key);
      }
    }
    node.claims.EraseIf([&](const auto& claim) { return !unstored.contains(claim.first); });
    if (!node.claims.empty()) next = now;  // claims whose jobs still hold them: again at the next look
    nodes_.BumpOrders(node);
    wakeups_.CapacityChanged();
  }
  return next;
}

pb::Orders AgentReconciler::OrdersFor(const NodeEntry& node) const {
  pb::Orders orders;
  orders.set_version(node.orders_version);
  for (const auto& [key, claim] : node.claims) {
    if (!claim.desired) {
      auto* kill = orders.add_kills();
      kill->set_job_id(key.first);
      kill->set_generation(key.second);
      kill->set_reason(claim.kill_reason);
      kill->set_grace_ms(absl::ToInt64Milliseconds(claim.kill_grace));
      continue;
    }
    const JobEntry* entry = jobs_.Find(key.first);
    if (entry == nullptr) continue;
    for (const auto& plan : entry->job().launch_plan()) {
      if (plan.node() != node.record.name()) continue;
      auto* launch = orders.add_launches();
      launch->set_job_id(key.first);
      launch->set_generation(key.second);
      *launch->mutable_plan() = plan;
      for (const auto& d : claim.device_ids) launch->add_device_ids(d);
    }
  }
  return orders;
}

absl::Status AgentReconciler::CheckLogPush(const NodeEntry& node, const std::string& job_id,
                                           uint64_t generation) const {
  const JobEntry* entry = jobs_.Find(job_id);
  pb::Job ended;  // a finished job's last lines come after its end: read it, do not parse it back in
  const pb::Job* job = entry == nullptr ? nullptr : &entry->Read(ended);
  if (job == nullptr || generation == 0 || generation > job->generation()) {
    // Distinct from the session's NOT_FOUND: the agent drops these logs instead of re-registering.
    return absl::FailedPreconditionError(absl::StrCat("no job ", job_id, " generation ", generation));
  }
  // Only a node the generation ran on may write its log: its claim (held until the agent stops
  // reporting the process, which is after its logs are pushed), or the current placement.
  // FAILED_PRECONDITION like an unknown job: the agent drops the bytes instead of retrying.
  bool placed = node.claims.contains({job_id, generation});
  if (generation == job->generation()) {
    for (const auto& p : job->placement()) placed = placed || p.node() == node.record.name();
  }
  if (!placed) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node.record.name(), " did not run job ", job_id, " generation ", generation));
  }
  return absl::OkStatus();
}

}  // namespace hetpool::daemon
