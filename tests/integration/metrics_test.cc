// hetpoold's and the agents' Prometheus endpoints, scraped over HTTP the way Prometheus does.
#include <cctype>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/metrics_scrape.h"

namespace hetpool::testing {
namespace {

TEST(Metrics, DaemonAndAgentsExportPoolQueueSchedulingAndDeviceTelemetry) {
  const int daemon_port = FreeTcpPort();
  const int agent_port = FreeTcpPort();
  auto options = TestCluster::ExamplePool();
  options.daemon_args = {"--metrics-listen", absl::StrCat("127.0.0.1:", daemon_port)};
  options.agents[0].args = {"--metrics-listen", absl::StrCat("127.0.0.1:", agent_port)};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.DaemonLog();

  // A job holding both H100s of one node for a while, and a half-card job beside it.
  pb::JobSpec pair = cluster.TrainSpec(1, 2, {"--steps", "400", "--step-sleep", "0.05"});
  pair.mutable_requirements()->add_vendors("nvidia");
  auto whole = cluster.Submit(pair);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(cluster.WaitForState(whole->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  pb::JobSpec half = cluster.TrainSpec(1, 1, {"--steps", "1"});
  half.set_device_milli(500);
  half.mutable_requirements()->add_vendors("nvidia");
  auto shared = cluster.Submit(half);
  ASSERT_TRUE(shared.ok()) << shared.status();
  auto done = cluster.WaitForState(shared->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok());

  // A call refused for what it asks: counted apart from the answered ones, by its code.
  EXPECT_TRUE(absl::IsNotFound(cluster.Get("no-such-job").status()));

  const std::string text = Scrape(daemon_port);
  ASSERT_FALSE(text.empty()) << cluster.DaemonLog();
  // Both nodes: 2 H100s each; one node's pair is held by the running job.
  double allocated_h100 = 0, free_h100 = 0;
  for (const std::string node : {"node-a", "node-b"}) {
    for (const std::string status : {"allocated", "free"}) {
      size_t at = 0;
      while ((at = text.find("hetpool_cards{", at)) != std::string::npos) {
        const size_t end = text.find('\n', at);
        const std::string line = text.substr(at, end - at);
        at = end;
        if (absl::StrContains(line, absl::StrCat("node=\"", node, "\"")) &&
            absl::StrContains(line, "model=\"H100-SXM\"") &&
            absl::StrContains(line, absl::StrCat("status=\"", status, "\""))) {
          (status == std::string("allocated") ? allocated_h100 : free_h100) +=
              std::stod(line.substr(line.rfind(' ') + 1));
        }
      }
    }
  }
  EXPECT_EQ(allocated_h100, 2) << text;
  EXPECT_EQ(free_h100, 2) << text;
  EXPECT_TRUE(absl::StrContains(text, "hetpool_cards_allocated_share{")) << text;
  EXPECT_EQ(Sample(text, "hetpool_jobs{priority=\"0\",state=\"running\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "hetpool_jobs{priority=\"0\",state=\"succeeded\"}"), 1) << text;
  EXPECT_GE(Sample(text, "hetpool_scheduling_decisions_total{result=\"placed\"}"), 2) << text;
  EXPECT_GE(Sample(text, "hetpool_scheduling_decision_seconds_count"), 2) << text;
  EXPECT_GE(Sample(text, "hetpool_store_write_seconds_count"), 4) << text;
  EXPECT_EQ(Sample(text, "hetpool_jobs_finished_total{reason=\"Succeeded\",state=\"succeeded\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "hetpool_job_duration_seconds_count{state=\"succeeded\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "hetpool_api_call_seconds_count{code=\"OK\",method=\"SubmitJob\"}"), 2) << text;
  EXPECT_EQ(Sample(text, "hetpool_api_call_seconds_count{code=\"NOT_FOUND\",method=\"GetJob\"}"), 1) << text;
  EXPECT_GE(Sample(text, "hetpool_api_call_seconds_count{code=\"OK\",method=\"Heartbeat\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "hetpool_node_ready{node=\"node-a\"}"), 1) << text;
  const double lag = Sample(text, "hetpool_agent_lease_lag_seconds{node=\"node-b\"}");
  EXPECT_GE(lag, 0) << text;
  EXPECT_LT(lag, 10) << text;
  EXPECT_TRUE(
      absl::StrContains(text, "hetpool_device_memory_bytes{device=\"nvidia0\",node=\"node-a\",vendor=\"nvidia\"}"))
      << text;

  const std::string agent = Scrape(agent_port);
  ASSERT_FALSE(agent.empty()) << cluster.AgentLog(0);
  EXPECT_EQ(Sample(agent, "hetpool_agent_registered{node=\"node-a\"}"), 1) << agent;
  EXPECT_EQ(
      Sample(
          agent,
          "hetpool_agent_device_memory_bytes{device=\"nvidia0\",model=\"H100-SXM\",node=\"node-a\",vendor=\"nvidia\"}"),
      81559.0 * 1048576.0)
      << agent;
  EXPECT_TRUE(absl::StrContains(agent, "hetpool_agent_device_healthy{device=\"cambricon1\"")) << agent;

  // The shipped Grafana dashboard and alert rules chart only metrics that exist.
  std::set<std::string> used;
  for (const char* file : {"grafana-dashboard.json", "hetpool-alerts.yml"}) {
    std::ifstream in(std::string(HETPOOL_SOURCE_DIR) + "/deploy/monitoring/" + file);
    const std::string content((std::istreambuf_iterator<char>(in)), {});
    ASSERT_FALSE(content.empty()) << file;
    // Every hetpool_[a-z_]+ word in the file.
    for (size_t at = content.find("hetpool_"); at != std::string::npos; at = content.find("hetpool_", at + 1)) {
      size_t end = at + 8;
      while (end < content.size() && (std::islower(static_cast<unsigned char>(content[end])) || content[end] == '_'))
        ++end;
      std::string metric = content.substr(at, end - at);
      for (const char* suffix : {"_bucket", "_count", "_sum"}) {
        if (absl::EndsWith(metric, suffix)) metric.resize(metric.size() - std::string(suffix).size());
      }
      used.insert(metric);
    }
  }
  EXPECT_GE(used.size(), 10u);
  for (const auto& metric : used) {
    EXPECT_TRUE(absl::StrContains(text, "# TYPE " + metric + " ") || absl::StrContains(agent, "# TYPE " + metric + " "))
        << metric << " is charted but not exported";
  }
}

}  // namespace
}  // namespace hetpool::testing
