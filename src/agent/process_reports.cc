#include "src/agent/process_reports.h"

namespace hetpool::agent {

namespace pb = ::hetpool::v1;

namespace {

void ReportFailure(const ProcessRecord& r, const std::string& node_name, pb::RankFailure& failure) {
  failure.set_out_of_memory_mib(r.out_of_memory_mib);
  failure.set_memory_asked(r.out_of_memory_mib > 0 && r.spec.limits.memory_asked);
  failure.set_node(node_name);
  failure.set_launch_failure(r.launch_failure);
  failure.set_global_rank(-1);
  failure.set_local_rank(-1);
  if (const auto& t = r.torchrun_failure) {
    failure.set_global_rank(t->global_rank);
    failure.set_local_rank(t->local_rank);
    failure.set_exit_code(t->exit_code);
    failure.set_signal(t->signal);
    for (const auto& line : t->last_lines) failure.add_last_lines(line);
  }
}

}  // namespace

void ReportProcesses(const std::map<Runner::Key, ProcessRecord>& records, const std::string& node_name,
                     google::protobuf::RepeatedPtrField<pb::ProcessStatus>& out) {
  for (const auto& [key, r] : records) {
    auto* s = out.Add();
    s->set_job_id(key.first);
    s->set_generation(key.second);
    const bool exited = r.exited && r.logs_flushed;
    s->set_running(!exited);
    s->set_exited(exited);
    s->set_exit_code(r.exit_code);
    s->set_message(r.message);
    s->set_pid(r.pid);
    s->set_note(r.spec.note);
    s->set_output_lost(OutputLost(r));
    s->set_confinement(r.confinement);
    s->set_strays_killed(r.strays_killed);
    s->set_working_dir_unwritable(r.spec.working_dir_unwritable);
    for (const auto& leftover : r.card_leftovers) s->add_card_leftovers(leftover);
    for (const auto& arg : r.runtime_argv) s->add_runtime_argv(arg);
    for (const auto& d : r.spec.device_ids) s->add_device_ids(d);
    for (int rank : r.global_ranks) s->add_global_ranks(rank);
    if (!r.launch_failure.empty() || r.torchrun_failure || r.out_of_memory_mib > 0) {
      ReportFailure(r, node_name, *s->mutable_rank_failure());
    }
  }
}

}  // namespace hetpool::agent
