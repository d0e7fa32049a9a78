// sweep_throughput: how fast a sweep of trivial jobs runs through the whole product (issue 63).
// Starts hetpoold and one agent simulating a CPU node (--cpus cores, no cards), submits --jobs
// one-process jobs of 1 CPU running /bin/true through the API from 8 clients at once, and waits
// until every one has ended. Reports jobs/s from the first submission to the last end, how many
// succeeded, the agent's and the daemon's CPU per job, and the agent's CPU per second of idle
// (measured over --idle-seconds before the sweep). Daemon and agent run as users run them (their
// default flags; --confine auto confines each job in its cgroup when run as root).
// With --array true the jobs are one array's tasks, submitted at once.
//   sweep_throughput [--jobs 300] [--cpus 64] [--launcher auto|direct|torchrun] [--confine auto|off]
//                    [--array false|true] [--idle-seconds 5] [-o json]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/bench/proc_cpu.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/temp_dir.h"

namespace {

using namespace hetpool::testing;
namespace pb = ::hetpool::v1;
using hetpool::bench::CpuSeconds;

bool AnyUnfinished(pb::JobService::Stub& jobs) {
  pb::ListJobsRequest req;
  for (auto state : {pb::JOB_STATE_PENDING, pb::JOB_STATE_SCHEDULED, pb::JOB_STATE_RUNNING}) req.add_states(state);
  req.set_page_size(1);
  pb::ListJobsResponse resp;
  grpc::ClientContext ctx;
  return !jobs.ListJobs(&ctx, req, &resp).ok() || resp.jobs_size() > 0;
}

int Usage() {
  std::cerr << "usage: sweep_throughput [--jobs 300] [--cpus 64] [--launcher auto|direct|torchrun] "
               "[--confine auto|off] [--array false|true] [--idle-seconds 5] [-o json]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 300, cpus = 64, idle_seconds = 5;
  std::string launcher = "auto", confine = "auto", output = "table";
  bool array = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--jobs") {
      jobs = std::stoi(value);
    } else if (flag == "--cpus") {
      cpus = std::stoi(value);
    } else if (flag == "--launcher") {
      launcher = value;
    } else if (flag == "--confine") {
      confine = value;
    } else if (flag == "--idle-seconds") {
      idle_seconds = std::stoi(value);
    } else if (flag == "--array") {
      array = value == "true";
    } else if (flag == "-o") {
      output = value;
    } else {
      return Usage();
    }
  }
  TempDir dir;
  const std::string inventory = dir.path() + "/cpu-node.json";
  std::ofstream(inventory) << nlohmann::json{
      {"hostname", "sweep-node"},
      {"cpus", cpus},
      {"memory_mib", 262144},
      {"devices",
       nlohmann::json::array()}}.dump();
  TestCluster::Options options;
  options.daemon_args = {"--log-level", "warn"};
  options.agents.push_back(AgentSpec{.name = "sweep-node",
                                     .inventory_file = inventory,
                                     .args = {"--confine", confine, "--log-level", "warn"},
                                     .job_dirs = "/tmp"});
  TestCluster cluster(options);
  if (auto s = cluster.Start(); !s.ok()) {
    std::cerr << s << "\n" << cluster.AgentLog(0);
    return 1;
  }
  const pid_t agent = cluster.agent_pid(0);
  const pid_t daemon = cluster.daemon_pid();

  // The agent's cost while nothing runs: heartbeats, inventory refreshes, its loop.
  const double idle_before = CpuSeconds(agent);
  std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
  const double idle_cpu = CpuSeconds(agent) - idle_before;

  const double agent_before = CpuSeconds(agent), daemon_before = CpuSeconds(daemon);
  const auto t0 = std::chrono::steady_clock::now();
  // An array is one submission of all the jobs as its tasks.
  const int submissions = array ? 1 : jobs;
  std::atomic<int> next{0}, refused{0};
  std::mutex mu;
  std::string first_error;
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetInt("hetpool.client", c);  // a connection of its own, as separate users would have
      auto stub = pb::JobService::NewStub(
          grpc::CreateCustomChannel(cluster.address(), grpc::InsecureChannelCredentials(), args));
      for (int n = next++; n < submissions; n = next++) {
        pb::SubmitJobRequest req;
        auto& spec = *req.mutable_spec();
        spec.set_name(absl::StrCat("sweep-", n));
        spec.set_user("researcher");
        spec.add_command("/bin/true");
        spec.set_working_dir("/tmp");
        spec.set_nnodes(1);
        spec.set_devices_per_node(0);
        spec.set_procs_per_node(1);
        spec.set_launcher(launcher);
        spec.mutable_host()->set_cpu_milli_per_process(1000);
        if (array) spec.mutable_array()->set_count(jobs);
        req.set_request_id(absl::StrCat("sweep-", n));
        for (;;) {
          pb::SubmitJobResponse resp;
          grpc::ClientContext ctx;
          const grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
          if (s.ok()) break;
          // The per-user rate limit: wait a little, as hetpoolctl submit does, and try again.
          if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
            std::lock_guard<std::mutex> lock(mu);
            if (first_error.empty()) first_error = absl::StrCat(s.error_code(), ": ", s.error_message());
            ++refused;
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  const double submitted_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto stub = pb::JobService::NewStub(grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));
  while (AnyUnfinished(*stub)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double agent_cpu = CpuSeconds(agent) - agent_before, daemon_cpu = CpuSeconds(daemon) - daemon_before;

  int succeeded = 0;
  std::string confinement;  // what confined the jobs, as their placements say
  if (array) {
    // The array's own line counts its tasks; a task says what confined it.
    pb::GetJobRequest get;
    get.set_job_id("job-000001");
    pb::Job job;
    grpc::ClientContext ctx;
    if (stub->GetJob(&ctx, get, &job).ok()) succeeded = job.array_tasks().succeeded();
    get.set_job_id("job-000001.0");
    grpc::ClientContext task_ctx;
    if (stub->GetJob(&task_ctx, get, &job).ok() && job.placement_size() > 0) {
      confinement = job.placement(0).confinement();
    }
  }
  pb::ListJobsRequest req;
  req.add_states(pb::JOB_STATE_SUCCEEDED);
  req.set_page_size(1000);
  for (; !array;) {
    pb::ListJobsResponse resp;
    grpc::ClientContext ctx;
    if (!stub->ListJobs(&ctx, req, &resp).ok()) break;
    succeeded += resp.jobs_size();
    for (const auto& job : resp.jobs()) {
      if (confinement.empty() && job.placement_size() > 0) confinement = job.placement(0).confinement();
    }
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  nlohmann::json out = {{"jobs", jobs},
                        {"cpus", cpus},
                        {"launcher", launcher},
                        {"array", array},
                        {"confine", confine},
                        {"confinement", confinement.empty() ? "none" : confinement},
                        {"succeeded", succeeded},
                        {"refused", refused.load()},
                        {"first_error", first_error},
                        {"submitted_in_seconds", submitted_after},
                        {"seconds", elapsed},
                        {"jobs_per_second", jobs / elapsed},
                        {"agent_cpu_ms_per_job", 1000 * agent_cpu / jobs},
                        {"daemon_cpu_ms_per_job", 1000 * daemon_cpu / jobs},
                        {"agent_idle_cpu_ms_per_second", 1000 * idle_cpu / idle_seconds}};
  std::cout << (output == "json" ? out.dump(2) : out.dump()) << "\n";
  return succeeded == jobs ? 0 : 1;
}
