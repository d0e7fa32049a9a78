// The control plane on etcd, highly available: 3 etcd members, 3 hetpoold replicas, one sim agent
// that knows every replica. Kill -9 the leading daemon during a storm of submissions: a new leader
// serves within 5 s, every acknowledged job is there exactly once, and no job runs twice.
#include <sys/wait.h>

#include <csignal>
#include <iostream>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "hetpool/v1/cluster.grpc.pb.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "src/common/convert.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/read_file.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

struct Replica {
  int port = 0;
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<pb::JobService::Stub> jobs;
  std::unique_ptr<pb::ClusterService::Stub> cluster;
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
};

class HighAvailability : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start().ok()) << etcd_.member(0).Log();
    for (int i = 0; i < 3; ++i) {
      Replica r;
      r.port = FreeTcpPort();
      auto channel = FastReconnectChannel(r.address());  // replicas come and go
      r.jobs = pb::JobService::NewStub(channel);
      r.cluster = pb::ClusterService::NewStub(channel);
      replicas_.push_back(std::move(r));
      ASSERT_TRUE(StartReplica(static_cast<size_t>(i)).ok());
    }
    std::vector<std::string> addresses;
    for (const auto& r : replicas_) addresses.push_back(r.address());
    std::vector<std::string> argv = {HETPOOL_AGENT_BIN,
                                     "--server",
                                     absl::StrJoin(addresses, ","),
                                     "--node-name",
                                     "node-a",
                                     "--work-dir",
                                     dir_.path() + "/agent",
                                     "--backend",
                                     "sim",
                                     "--inventory",
                                     std::string(HETPOOL_SOURCE_DIR) + "/deploy/examples/node-a.json",
                                     "--inventory-refresh",
                                     "500ms"};
    for (const auto& flag : PlainAgentFlags()) argv.push_back(flag);
    auto agent = ChildProcess::Spawn(argv, dir_.path() + "/agent.log");
    ASSERT_TRUE(agent.ok());
    agent_ = *std::move(agent);
  }

  absl::Status StartReplica(size_t i, const std::string& leader_lease = "2s") {
    Replica& r = replicas_[i];
    auto process = ChildProcess::Spawn(
        {HETPOOLD_BIN, "--listen", r.address(), "--data-dir", absl::StrCat(dir_.path(), "/d", i), "--store",
         "etcd://" + etcd_.endpoints(), "--leader-lease", leader_lease, "--lease-ttl", "10s", "--rdzv-port-range",
         absl::StrCat(31000 + 50 * i, "-", 31049 + 50 * i), "--insecure",
         // One log directory every replica mounts (docs/reliability.md), so logs survive failover.
         "--logs-dir", dir_.path() + "/shared-logs"},
        absl::StrCat(dir_.path(), "/daemon", i, ".log"));
    if (!process.ok()) return process.status();
    r.process = *std::move(process);
    return absl::OkStatus();
  }

  // A call to replica `i` marked as passed on already, so that it answers for itself: OK from the
  // leader, a refusal naming the leader (or why none is known) from a follower.
  grpc::Status AskForItself(size_t i, absl::Duration patience) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-hetpool-forwarded", "1");
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + patience));
    pb::ListNodesResponse resp;
    return replicas_[i].cluster->ListNodes(&ctx, pb::ListNodesRequest(), &resp);
  }

  // The replica that leads, or -1. (Followers pass API calls on to the leader, except calls
  // marked as already passed on: those they refuse, naming the leader.)
  int Leader() {
    for (size_t i = 0; i < replicas_.size(); ++i) {
      if (!replicas_[i].process) continue;
      const grpc::Status s = AskForItself(i, absl::Milliseconds(500));
      if (s.ok()) return static_cast<int>(i);
      if (getenv("HA_DEBUG")) fprintf(stderr, "replica %zu: %d %s\n", i, s.error_code(), s.error_message().c_str());
    }
    return -1;
  }

  // Waits (at most `patience`) for a replica to lead; -1 when none does.
  int WaitForLeader(absl::Duration patience = absl::Seconds(15)) {
    int leader = -1;
    Eventually([&] { return (leader = Leader()) >= 0; }, patience);
    return leader;
  }

  // kill -9 of replica `i`, reaped.
  void KillReplica(int i) {
    Replica& r = replicas_[static_cast<size_t>(i)];
    r.process->Signal(SIGKILL);
    r.process->Wait(absl::Seconds(5));
    r.process.reset();
  }

  // A job of `user` on one of the node's H100 cards, running `command`.
  static pb::JobSpec OneCardJob(const std::string& user, const std::vector<std::string>& command) {
    pb::JobSpec spec;
    spec.set_user(user);
    for (const auto& arg : command) spec.add_command(arg);
    spec.set_working_dir("/tmp");
    spec.set_nnodes(1);
    spec.set_devices_per_node(1);
    spec.mutable_requirements()->add_vendors("nvidia");
    return spec;
  }

  // Submits with a request id, on whichever live replica accepts it.
  absl::StatusOr<pb::Job> SubmitSomewhere(const pb::JobSpec& spec, const std::string& request_id) {
    pb::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    req.set_request_id(request_id);
    std::vector<pb::JobService::Stub*> live;
    for (auto& r : replicas_) live.push_back(r.process ? r.jobs.get() : nullptr);
    return SubmitToAnyReplica(live, req, absl::Seconds(30));
  }

  std::string Logs() {
    std::string out;
    for (int i = 0; i < 3; ++i)
      absl::StrAppend(&out, "--- daemon ", i, "\n", ReadAll(absl::StrCat(dir_.path(), "/daemon", i, ".log")));
    return out;
  }

  TempDir dir_;
  EtcdCluster etcd_{dir_.path(), 3};
  std::vector<Replica> replicas_;
  std::unique_ptr<ChildProcess> agent_;
};

// Issue 60, item 10: a lone replica killed with SIGKILL and started again on its own address
// leads at once. Before, it waited out its predecessor's lease (60 s here), answering "not the
// leader; the leader is at <its own address>" meanwhile.
TEST_F(HighAvailability, AReplicaStartedAgainOnItsOwnAddressDoesNotWaitOutItsPredecessorsLease) {
  for (int i = 0; i < 3; ++i) KillReplica(i);
  ASSERT_TRUE(StartReplica(0, "60s").ok());
  ASSERT_EQ(WaitForLeader(absl::Seconds(30)), 0) << Logs();  // the old leader's 2 s key lapses first
  KillReplica(0);
  ASSERT_TRUE(StartReplica(0, "60s").ok());
  ASSERT_EQ(WaitForLeader(absl::Seconds(30)), 0) << "it waited out its own predecessor's lease\n" << Logs();
  EXPECT_TRUE(absl::StrContains(ReadAll(dir_.path() + "/daemon0.log"), "its predecessor's")) << Logs();
}

TEST_F(HighAvailability, KillingTheLeaderDuringASubmissionStormLosesAndDuplicatesNothing) {
  const int leader = WaitForLeader();
  ASSERT_GE(leader, 0) << Logs();
  // Exactly one replica leads; the others, asked not to pass the call on, say who leads (once
  // their next campaign step has seen the key, a third of the lease at most).
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (static_cast<int>(i) == leader) continue;
    grpc::Status s;
    Eventually(
        [&] {
          s = AskForItself(i, absl::Seconds(2));
          // (Until then: "no leader is elected yet", or the channel still connecting.)
          return s.error_message().rfind("not the leader; the leader is at ", 0) == 0;
        },
        absl::Seconds(3));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(),
              "not the leader; the leader is at " + replicas_[static_cast<size_t>(leader)].address());
  }

  // A follower serves reads and writes by passing them on to the leader.
  {
    const size_t follower = (static_cast<size_t>(leader) + 1) % replicas_.size();
    grpc::ClientContext ctx;
    pb::ListNodesResponse resp;
    EXPECT_TRUE(replicas_[follower].cluster->ListNodes(&ctx, pb::ListNodesRequest(), &resp).ok());
  }

  // Short jobs on the node's two H100 cards, so at most two run at once.
  const pb::JobSpec spec = OneCardJob("storm", {"/bin/true"});
  constexpr int kJobs = 16;
  std::map<std::string, std::string> acknowledged;  // request id -> job id
  absl::Duration failover;
  for (int i = 0; i < kJobs; ++i) {
    const std::string request_id = absl::StrCat("storm-", i);
    auto job = SubmitSomewhere(spec, request_id);
    ASSERT_TRUE(job.ok()) << job.status() << Logs();
    acknowledged[request_id] = job->id();
    if (i == 5) {
      KillReplica(leader);
      // A client that retries a submission whose reply it never saw gets the first job back,
      // from the new leader.
      const absl::Time killed = absl::Now();
      auto again = SubmitSomewhere(spec, request_id);
      failover = absl::Now() - killed;
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(again->id(), job->id());
    }
  }
  EXPECT_LT(failover, absl::Seconds(5)) << "a new leader must serve within 5 s";
  std::cout << "failover: the first submission after the kill took " << absl::FormatDuration(failover) << "\n";
  RecordProperty("failover_ms", static_cast<int>(absl::ToInt64Milliseconds(failover)));
  const int new_leader = Leader();
  ASSERT_GE(new_leader, 0);
  ASSERT_NE(new_leader, leader);

  // hetpoolctl, given every address, finds the new leader.
  std::vector<std::string> addresses;
  for (const auto& r : replicas_) addresses.push_back(r.address());
  auto cli = ChildProcess::Spawn(
      {HETPOOLCTL_BIN, "--server", absl::StrJoin(addresses, ","), "--insecure", "get", acknowledged.begin()->second},
      dir_.path() + "/cli.out");
  ASSERT_TRUE(cli.ok());
  EXPECT_EQ((*cli)->Wait(absl::Seconds(30)), std::optional<int>(0)) << ReadAll(dir_.path() + "/cli.out");

  // Every acknowledged job, once each, and each ran once: it finishes in its first generation.
  auto& r = replicas_[static_cast<size_t>(new_leader)];
  std::set<std::string> ids;
  for (const auto& [request_id, id] : acknowledged) ids.insert(id);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kJobs));
  for (absl::Time deadline = absl::Now() + absl::Seconds(150); absl::Now() < deadline;) {
    pb::ListJobsRequest req;
    req.set_page_size(1000);
    pb::ListJobsResponse list;
    grpc::ClientContext ctx;
    ASSERT_TRUE(r.jobs->ListJobs(&ctx, req, &list).ok());
    ASSERT_EQ(list.jobs_size(), kJobs) << "no job lost, none duplicated";
    int done = 0;
    for (const auto& job : list.jobs()) {
      ASSERT_TRUE(ids.contains(job.id())) << job.id();
      EXPECT_LE(job.generation(), 1u) << job.id() << " was launched twice";
      EXPECT_EQ(job.restart_count(), 0) << job.id();
      EXPECT_NE(job.state(), pb::JOB_STATE_FAILED) << job.DebugString();
      done += job.state() == pb::JOB_STATE_SUCCEEDED;
    }
    if (done == kJobs) return;
    absl::SleepFor(absl::Milliseconds(500));
  }
  FAIL() << "jobs did not finish\n" << Logs();
}

// hetpoolctl against every replica, the given order; its exit status, stdout+stderr in *out.
int RunCliAgainst(const std::string& servers, const std::vector<std::string>& args, const std::string& log,
                  std::string* out, absl::Duration patience = absl::Seconds(120)) {
  std::vector<std::string> argv = {HETPOOLCTL_BIN, "--server", servers, "--insecure"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = ChildProcess::Spawn(argv, log);
  if (!child.ok()) return -1;
  auto status = (*child)->Wait(patience);
  *out = ReadAll(log);
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

// Issue 45, item 4: with a follower first in --server, `wait`, `watch` and `logs` failed with
// "not the leader; the leader is at B" and kept failing after the failover ended. Now hetpoolctl
// goes to the leader the followers name, and a `wait` running when the leader is killed rides
// through the failover to the job's end. With etcd out of quorum, a follower no longer names the
// dead leader.
TEST_F(HighAvailability, TheCliFindsTheLeaderAndWaitRidesThroughAFailover) {
  const int leader = WaitForLeader();
  ASSERT_GE(leader, 0) << Logs();
  const size_t first = (static_cast<size_t>(leader) + 1) % replicas_.size();  // a follower first
  std::vector<std::string> order = {replicas_[first].address()};
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (i != first) order.push_back(replicas_[i].address());
  }
  const std::string servers = absl::StrJoin(order, ",");

  const pb::JobSpec spec = OneCardJob("ci", {"/bin/sh", "-c", "echo before; sleep 12; echo after"});
  auto job = SubmitSomewhere(spec, "cli-1");
  ASSERT_TRUE(job.ok()) << job.status();

  std::string out;
  // A stream at once through the follower-first list: before, UNAVAILABLE and exit 1.
  for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
    ASSERT_EQ(RunCliAgainst(servers, {"logs", job->id()}, dir_.path() + "/cli-logs.out", &out), 0) << out;
    if (absl::StrContains(out, "before")) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(absl::StrContains(out, "before")) << out;

  // `wait` runs while the leader is killed.
  auto waiting =
      ChildProcess::Spawn({HETPOOLCTL_BIN, "--server", servers, "--insecure", "wait", job->id(), "--timeout", "120s"},
                          dir_.path() + "/cli-wait.out");
  ASSERT_TRUE(waiting.ok());
  absl::SleepFor(absl::Seconds(2));  // the wait's stream is open (the job runs for 12 s)
  KillReplica(leader);
  auto waited = (*waiting)->Wait(absl::Seconds(120));
  const std::string wait_out = ReadAll(dir_.path() + "/cli-wait.out");
  ASSERT_TRUE(waited.has_value()) << wait_out;
  EXPECT_TRUE(WIFEXITED(*waited) && WEXITSTATUS(*waited) == 0) << wait_out << Logs();
  EXPECT_TRUE(absl::StrContains(wait_out, job->id() + " SUCCEEDED")) << wait_out;
  EXPECT_EQ(RunCliAgainst(servers, {"watch", job->id()}, dir_.path() + "/cli-watch.out", &out), 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "Succeeded")) << out;
  // The Python client the same way: a stream through the follower-first list.
  auto python = ChildProcess::Spawn({"/usr/bin/python3", "-c",
                                     "import sys, hetpool\n"
                                     "job = hetpool.Client(server=sys.argv[1], insecure=True).get(sys.argv[2])\n"
                                     "job.wait(timeout=60)\n"
                                     "print(''.join(job.logs()))\n",
                                     servers, job->id()},
                                    dir_.path() + "/python.out", {{"PYTHONPATH", HETPOOL_PYTHON_PACKAGE_DIR}});
  ASSERT_TRUE(python.ok());
  auto python_exit = (*python)->Wait(absl::Seconds(90));
  const std::string python_out = ReadAll(dir_.path() + "/python.out");
  EXPECT_TRUE(python_exit && WIFEXITED(*python_exit) && WEXITSTATUS(*python_exit) == 0) << python_out;
  EXPECT_TRUE(absl::StrContains(python_out, "after")) << python_out;

  // etcd loses its quorum: a follower says so rather than naming a leader that may be dead.
  etcd_.member(1).Kill(SIGKILL);
  etcd_.member(2).Kill(SIGKILL);
  grpc::Status s;
  Eventually(
      [&] {
        for (size_t i = 0; i < replicas_.size(); ++i) {
          if (!replicas_[i].process) continue;
          s = AskForItself(i, absl::Seconds(2));
          if (absl::StrContains(s.error_message(), "(no quorum?)")) return true;
        }
        return false;
      },
      absl::Seconds(30), absl::Milliseconds(200));
  EXPECT_TRUE(absl::StrContains(s.error_message(), "not the leader; no leader is known: etcd has not answered"))
      << s.error_message();
}

// Issue 14, item 13: a finished job's log is readable from whichever replica leads.
TEST_F(HighAvailability, LogsOfFinishedJobsAreReadFromTheNewLeader) {
  const int leader = WaitForLeader();
  ASSERT_GE(leader, 0) << Logs();
  const pb::JobSpec spec = OneCardJob("reader", {"/bin/echo", "written-before-the-failover"});
  auto job = SubmitSomewhere(spec, "log-1");
  ASSERT_TRUE(job.ok()) << job.status();
  auto read_logs = [&](size_t replica, std::string* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    pb::GetJobLogsRequest req;
    req.set_job_id(job->id());
    auto reader = replicas_[replica].jobs->GetJobLogs(&ctx, req);
    pb::LogChunk chunk;
    while (reader->Read(&chunk)) *out += chunk.data();
    return reader->Finish();
  };
  const bool finished = Eventually(
      [&] {
        grpc::ClientContext ctx;
        pb::GetJobRequest get;
        get.set_job_id(job->id());
        pb::Job seen;
        return replicas_[static_cast<size_t>(leader)].jobs->GetJob(&ctx, get, &seen).ok() &&
               seen.state() == pb::JOB_STATE_SUCCEEDED;
      },
      absl::Seconds(60), absl::Milliseconds(200));
  ASSERT_TRUE(finished) << Logs();
  KillReplica(leader);
  const int new_leader = WaitForLeader();
  ASSERT_GE(new_leader, 0) << Logs();
  std::string out;
  const grpc::Status status = read_logs(static_cast<size_t>(new_leader), &out);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(absl::StrContains(out, "written-before-the-failover")) << out;
}

}  // namespace
}  // namespace hetpool::testing
