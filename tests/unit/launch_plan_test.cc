#include "src/daemon/launch/launch_plan.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace hetpool::daemon {
namespace {

hetpool::v1::JobSpec Spec() {
  hetpool::v1::JobSpec spec;
  spec.set_user("alice");
  spec.mutable_python()->set_script("train.py");
  spec.mutable_python()->add_args("--lr");
  spec.mutable_python()->add_args("0.1");
  spec.set_working_dir("/data/run");
  spec.set_nnodes(2);
  spec.set_devices_per_node(2);
  spec.set_procs_per_node(2);
  (*spec.mutable_env())["MY_FLAG"] = "1";
  return spec;
}

LaunchInput Input(Vendor vendor) {
  LaunchInput in;
  in.job_id = "job-000042";
  in.generation = 3;
  in.restart_count = 2;
  in.vendor = vendor;
  in.rendezvous_port = 29501;
  const std::string v(VendorName(vendor));
  for (const char* name : {"node-a", "node-b"}) {
    LaunchNode node;
    node.name = name;
    node.address = std::string(name) == "node-a" ? "10.0.0.1" : "10.0.0.2";
    node.torchrun_path = "/usr/bin/torchrun";
    node.work_dir = std::string("/var/lib/agent-") + name;
    if (vendor != Vendor::kCpu) {
      node.device_ids = {v + "2", v + "3"};
      node.device_index = {{v + "2", 2}, {v + "3", 3}};
    }
    in.nodes.push_back(node);
  }
  return in;
}

std::vector<std::string> Argv(const hetpool::v1::NodeLaunchPlan& plan) {
  return {plan.argv().begin(), plan.argv().end()};
}

TEST(LaunchPlan, TorchrunArgvForRankZeroAndOthers) {
  auto plans = BuildLaunchPlans(Spec(), Input(Vendor::kNvidia));
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 2u);
  const std::vector<std::string> expected0 = {"/usr/bin/torchrun",
                                              "--nnodes",
                                              "2",
                                              "--nproc_per_node",
                                              "2",
                                              "--node_rank",
                                              "0",
                                              "--rdzv_backend",
                                              "c10d",
                                              "--rdzv_endpoint",
                                              "10.0.0.1:29501",
                                              "--rdzv_id",
                                              "job-000042",
                                              "--rdzv_conf",
                                              "is_host=1",
                                              "--max_restarts",
                                              "0",
                                              "--monitor_interval",
                                              "0.1",
                                              "--redirects",
                                              "1",
                                              "--tee",
                                              "1",
                                              "--log_dir",
                                              "/var/lib/agent-node-a/jobs/job-000042/g3/torchrun",
                                              "train.py",
                                              "--lr",
                                              "0.1"};
  EXPECT_EQ(Argv((*plans)[0]), expected0);
  const auto argv1 = Argv((*plans)[1]);
  // Every node rendezvouses at rank 0's address; only rank 0 hosts the store.
  EXPECT_NE(std::find(argv1.begin(), argv1.end(), "10.0.0.1:29501"), argv1.end());
  EXPECT_NE(std::find(argv1.begin(), argv1.end(), "is_host=0"), argv1.end());
  EXPECT_EQ((*plans)[1].node_rank(), 1);
  EXPECT_EQ((*plans)[0].working_dir(), "/data/run");
  EXPECT_EQ((*plans)[0].procs(), 2);
}

TEST(LaunchPlan, CommandRunsWithNoPython) {
  auto spec = Spec();
  spec.clear_python();
  spec.add_command("/opt/bin/trainer");
  spec.add_command("--fast");
  auto plans = BuildLaunchPlans(spec, Input(Vendor::kNvidia));
  ASSERT_TRUE(plans.ok());
  const auto argv = Argv((*plans)[0]);
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(argv.end() - 3, argv.end()),
            (std::vector<std::string>{"--no_python", "/opt/bin/trainer", "--fast"}));
}

// One node, one process: the agent starts the script itself, under the interpreter it reported,
// with torchrun's variables for its one worker; "launcher": "torchrun" keeps torchrun.
TEST(LaunchPlan, OneProcessOnOneNodeStartsDirectly) {
  auto spec = Spec();
  spec.set_nnodes(1);
  spec.set_procs_per_node(1);
  auto input = Input(Vendor::kNvidia);
  input.nodes.resize(1);
  input.nodes[0].python_path = "/usr/bin/python3.11";
  auto plans = BuildLaunchPlans(spec, input);
  ASSERT_TRUE(plans.ok()) << plans.status();
  const auto& plan = (*plans)[0];
  EXPECT_EQ(plan.launcher(), "direct");
  EXPECT_EQ(Argv(plan), (std::vector<std::string>{"/usr/bin/python3.11", "-u", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(plan.script(), "train.py");
  for (const auto& [key, value] : std::map<std::string, std::string>{{"RANK", "0"},
                                                                     {"LOCAL_RANK", "0"},
                                                                     {"WORLD_SIZE", "1"},
                                                                     {"LOCAL_WORLD_SIZE", "1"},
                                                                     {"GROUP_RANK", "0"},
                                                                     {"MASTER_ADDR", "127.0.0.1"},
                                                                     {"TORCHELASTIC_RUN_ID", "job-000042"},
                                                                     {"CUDA_VISIBLE_DEVICES", "2,3"}}) {
    ASSERT_TRUE(plan.env().contains(key)) << key;
    EXPECT_EQ(plan.env().at(key), value) << key;
  }
  EXPECT_FALSE(plan.env().contains("MASTER_PORT"));  // the agent's pick, when it starts it

  // A command runs as it is; an agent that reported no interpreter runs a script under torchrun.
  auto command = spec;
  command.clear_python();
  command.add_command("true");
  auto direct_command = BuildLaunchPlans(command, input);
  ASSERT_TRUE(direct_command.ok());
  EXPECT_EQ(Argv((*direct_command)[0]), std::vector<std::string>{"true"});
  input.nodes[0].python_path.clear();
  auto older = BuildLaunchPlans(spec, input);
  ASSERT_TRUE(older.ok());
  EXPECT_EQ((*older)[0].launcher(), "torchrun");
  EXPECT_EQ(Argv((*older)[0])[0], "/usr/bin/torchrun");
  spec.set_launcher("direct");
  EXPECT_EQ(BuildLaunchPlans(spec, input).status().code(), absl::StatusCode::kFailedPrecondition);

  input.nodes[0].python_path = "/usr/bin/python3.11";
  spec.set_launcher("torchrun");
  auto kept = BuildLaunchPlans(spec, input);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ((*kept)[0].launcher(), "torchrun");
  EXPECT_FALSE((*kept)[0].env().contains("RANK"));  // torchrun sets its workers' own
}

TEST(LaunchPlan, MoreThanOneProcessKeepsTorchrun) {
  auto spec = Spec();
  spec.set_nnodes(1);
  auto input = Input(Vendor::kNvidia);
  input.nodes.resize(1);
  input.nodes[0].python_path = "/usr/bin/python3.11";
  auto two_procs = BuildLaunchPlans(spec, input);
  ASSERT_TRUE(two_procs.ok());
  EXPECT_EQ((*two_procs)[0].launcher(), "torchrun");
  auto two_nodes = Input(Vendor::kNvidia);
  for (auto& node : two_nodes.nodes) node.python_path = "/usr/bin/python3.11";
  spec.set_procs_per_node(1);
  auto plans = BuildLaunchPlans(spec, two_nodes);
  ASSERT_TRUE(plans.ok());
  for (const auto& plan : *plans) EXPECT_EQ(plan.launcher(), "torchrun");
}

struct VendorCase {
  Vendor vendor;
  std::map<std::string, std::string> env;  // expected subset
  std::vector<std::string> absent;
};

TEST(LaunchPlan, VendorEnvironment) {
  const VendorCase cases[] = {
      {Vendor::kNvidia,
       {{"CUDA_VISIBLE_DEVICES", "2,3"}, {"HETPOOL_DIST_BACKEND", "nccl"}, {"HETPOOL_TORCH_DEVICE", "cuda"}},
       {"MACA_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}},
      {Vendor::kMetax,
       {{"MACA_VISIBLE_DEVICES", "2,3"},
        {"CUDA_VISIBLE_DEVICES", "2,3"},
        {"HETPOOL_DIST_BACKEND", "nccl"},
        {"HETPOOL_TORCH_DEVICE", "cuda"}},
       {"MLU_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}},
      {Vendor::kCambricon,
       {{"MLU_VISIBLE_DEVICES", "2,3"}, {"HETPOOL_DIST_BACKEND", "cncl"}, {"HETPOOL_TORCH_DEVICE", "mlu"}},
       {"CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}},
      {Vendor::kIntel,
       {{"ZE_AFFINITY_MASK", "2,3"}, {"HETPOOL_DIST_BACKEND", "xccl"}, {"HETPOOL_TORCH_DEVICE", "xpu"}},
       {"CUDA_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES"}},
      {Vendor::kCpu,
       {{"CUDA_VISIBLE_DEVICES", ""}, {"HETPOOL_DIST_BACKEND", "gloo"}, {"HETPOOL_TORCH_DEVICE", "cpu"}},
       {"MLU_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}},
  };
  for (const auto& c : cases) {
    auto plans = BuildLaunchPlans(Spec(), Input(c.vendor));
    ASSERT_TRUE(plans.ok()) << VendorName(c.vendor);
    for (const auto& plan : *plans) {
      const auto& env = plan.env();
      for (const auto& [k, v] : c.env) {
        ASSERT_TRUE(env.contains(k)) << VendorName(c.vendor) << " lacks " << k;
        EXPECT_EQ(env.at(k), v) << VendorName(c.vendor) << " " << k;
      }
      for (const auto& k : c.absent) EXPECT_FALSE(env.contains(k)) << VendorName(c.vendor) << " sets " << k;
      EXPECT_EQ(env.at("HETPOOL_JOB_ID"), "job-000042");
      EXPECT_EQ(env.at("HETPOOL_GENERATION"), "3");
      EXPECT_EQ(env.at("HETPOOL_RESTART_COUNT"), "2");
      // The same for every generation: the job's own storage, its id.
      EXPECT_EQ(env.at("HETPOOL_CHECKPOINT_DIR"), Spec().working_dir() + "/.hetpool/checkpoints/job-000042");
      EXPECT_EQ(env.at("HETPOOL_VENDOR"), std::string(VendorName(c.vendor)));
      EXPECT_EQ(env.at("MY_FLAG"), "1");
      EXPECT_EQ(plan.dist_backend(), env.at("HETPOOL_DIST_BACKEND"));
    }
  }
}

TEST(LaunchPlan, OneNodeHostsItsOwnStoreOnAPortTheKernelPicks) {
  auto in = Input(Vendor::kNvidia);
  in.nodes.resize(1);
  in.rendezvous_port = 0;  // none is picked for one node
  auto plans = BuildLaunchPlans(Spec(), in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  const auto argv = Argv((*plans)[0]);
  auto endpoint = std::find(argv.begin(), argv.end(), "--rdzv_endpoint");
  ASSERT_NE(endpoint, argv.end());
  EXPECT_EQ(*(endpoint + 1), "127.0.0.1:0");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "is_host=1"), argv.end());
}

TEST(LaunchPlan, RejectsMissingFacts) {
  auto in = Input(Vendor::kNvidia);
  in.rendezvous_port = 0;
  EXPECT_FALSE(BuildLaunchPlans(Spec(), in).ok());
  in = Input(Vendor::kNvidia);
  in.nodes[1].device_index.clear();
  EXPECT_EQ(BuildLaunchPlans(Spec(), in).status().code(), absl::StatusCode::kFailedPrecondition);
  in = Input(Vendor::kNvidia);
  in.nodes[0].torchrun_path.clear();
  EXPECT_EQ(BuildLaunchPlans(Spec(), in).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace hetpool::daemon

namespace hetpool::daemon {
namespace {

TEST(LaunchPlan, AJobAcrossVendorsGetsEachNodesOwnVendorGroupAndBatch) {
  hetpool::v1::JobSpec spec = Spec();
  spec.set_global_batch(44);
  LaunchInput in = Input(Vendor::kNvidia);
  in.collective = "hierarchical";
  in.nodes[0].vendor = Vendor::kNvidia;
  in.nodes[0].group = "h100";
  in.nodes[0].micro_batches = {20, 20};
  in.nodes[1].vendor = Vendor::kCambricon;
  in.nodes[1].group = "mlu";
  in.nodes[1].procs = 3;  // its group's procs_per_node
  in.nodes[1].device_ids = {"cambricon0", "cambricon1"};
  in.nodes[1].device_index = {{"cambricon0", 0}, {"cambricon1", 1}};
  in.nodes[1].micro_batches = {2, 1, 1};
  auto plans = BuildLaunchPlans(spec, in);
  ASSERT_TRUE(plans.ok()) << plans.status();
  const auto& a = (*plans)[0];
  const auto& b = (*plans)[1];
  EXPECT_EQ(a.vendor(), "nvidia");
  EXPECT_EQ(b.vendor(), "cambricon");
  EXPECT_EQ(a.env().at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(b.env().at("MLU_VISIBLE_DEVICES"), "0,1");
  EXPECT_FALSE(b.env().contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(b.procs(), 3);
  const std::vector<std::string> argv_b = Argv(b);
  EXPECT_EQ(argv_b[4], "3") << "--nproc_per_node follows the node's group";
  // One world on gloo, each group on its own library inside.
  EXPECT_EQ(a.env().at("HETPOOL_DIST_BACKEND"), "gloo");
  EXPECT_EQ(a.env().at("HETPOOL_INTRA_BACKEND"), "nccl");
  EXPECT_EQ(b.env().at("HETPOOL_INTRA_BACKEND"), "cncl");
  EXPECT_EQ(b.env().at("HETPOOL_INTER_BACKEND"), "gloo");
  EXPECT_EQ(b.dist_backend(), "cncl");
  EXPECT_EQ(b.inter_backend(), "gloo");
  EXPECT_EQ(b.group(), "mlu");
  EXPECT_EQ(a.env().at("HETPOOL_COLLECTIVE"), "hierarchical");
  EXPECT_EQ(b.env().at("HETPOOL_GROUPS"), "h100,mlu");
  EXPECT_EQ(b.env().at("HETPOOL_GROUP"), "mlu");
  EXPECT_EQ(b.env().at("HETPOOL_GROUP_NODE_RANK"), "0");
  EXPECT_EQ(b.env().at("HETPOOL_GROUP_WORLD"), "3");
  EXPECT_EQ(a.env().at("HETPOOL_GROUP_WORLD"), "2");
  EXPECT_EQ(a.env().at("HETPOOL_MICRO_BATCHES"), "20,20");
  EXPECT_EQ(a.env().at("HETPOOL_MICRO_BATCH"), "20");
  EXPECT_EQ(b.env().at("HETPOOL_MICRO_BATCHES"), "2,1,1");
  EXPECT_FALSE(b.env().contains("HETPOOL_MICRO_BATCH")) << "uneven on the node: only the list";
  EXPECT_EQ(b.env().at("HETPOOL_GLOBAL_BATCH"), "44");

  // A share list that does not match the ranks is a bug, not a launch.
  in.nodes[1].micro_batches = {2, 2};
  EXPECT_FALSE(BuildLaunchPlans(spec, in).ok());
}

}  // namespace
}  // namespace hetpool::daemon
