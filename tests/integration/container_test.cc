// Jobs in container images (issue 42) through hetpoold, two agents and a real runtime: podman with
// runc, as this build machine runs it (runc because crun refuses cgroup v1's hybrid mode; no
// default ulimits and no pids limit, which podman cannot set here). The image is built by the test
// from nothing (deploy/examples/make_torch_image.sh): usr/ comes from the host read-only, so the
// job runs the host's python3 and PyTorch inside the container.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {
namespace {

constexpr const char* kPodman = "/usr/bin/podman";
constexpr const char* kRunc = "/usr/sbin/runc";

// Why podman cannot be used here, or "".
std::string PodmanMissing() {
  if (geteuid() != 0) return "not root: the agent runs the container runtime as root";
  if (access(kPodman, X_OK) != 0 || access(kRunc, X_OK) != 0) {
    return "podman and runc are not installed (apt-get install podman runc; tests/run.sh installs them)";
  }
  return "";
}

// The containers.conf the issue names for this machine, in the cluster's directory.
std::string WriteContainersConf(const std::string& dir) {
  const std::string path = dir + "/containers.conf";
  std::ofstream(path) << "[containers]\ndefault_ulimits = []\npids_limit = 0\n";
  return path;
}

std::vector<std::string> RuntimeFlags(const std::string& program, const std::string& conf) {
  return {"--container-runtime",
          program,
          absl::StrCat("--container-runtime-args=--runtime=", kRunc),
          "--containers-conf",
          conf,
          "--container-mount-dirs",
          "/usr"};
}

// A local image built for this test run, removed when the test ends.
class TestImage {
 public:
  explicit TestImage(const std::string& conf)
      : name_(absl::StrCat("localhost/hetpool-test-torch:", getpid())), conf_(conf) {
    const std::string cmd =
        absl::StrCat(HETPOOL_SOURCE_DIR, "/deploy/examples/make_torch_image.sh ", name_, " ", conf_);
    built_ = std::system(cmd.c_str()) == 0;
  }
  ~TestImage() {
    const std::string cmd = absl::StrCat("CONTAINERS_CONF=", conf_, " ", kPodman, " --runtime=", kRunc, " rmi -f ",
                                         name_, " >/dev/null 2>&1");
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "could not remove " << name_;
  }
  bool built() const { return built_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_, conf_;
  bool built_ = false;
};

std::string FinalLoss(const std::string& logs) {
  std::smatch m;
  if (!std::regex_search(logs, m, std::regex(R"(final loss ([0-9.]+) \(first ([0-9.]+)\))"))) return "";
  return m[1];
}

pb::JobSpec InImage(pb::JobSpec spec, const std::string& image) {
  (*spec.mutable_container()->mutable_images())["*"] = image;
  auto* usr = spec.mutable_container()->add_mounts();
  usr->set_source("/usr");
  usr->set_read_only(true);
  return spec;
}

TEST(Containers, DdpInAnImageTrainsToTheSameLossAsWithout) {
  if (std::string why = PodmanMissing(); !why.empty()) GTEST_SKIP() << why;
  TestCluster cluster(TestCluster::ExamplePool());
  const std::string conf = WriteContainersConf(cluster.dir());
  for (auto& agent : cluster.mutable_options().agents) agent.args = RuntimeFlags(kPodman, conf);
  TestImage image(conf);
  ASSERT_TRUE(image.built()) << "deploy/examples/make_torch_image.sh failed";
  ASSERT_TRUE(cluster.Start().ok());

  auto run = [&](const pb::JobSpec& spec) -> absl::StatusOr<pb::Job> {
    auto submitted = cluster.Submit(spec);
    if (!submitted.ok()) return submitted.status();
    return cluster.WaitFor(
        submitted->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(240));
  };
  const pb::JobSpec plain = cluster.TrainSpec(2, 2, {"--steps", "30"});
  auto host = run(plain);
  ASSERT_TRUE(host.ok()) << host.status();
  auto host_logs = cluster.Logs(host->id());
  ASSERT_TRUE(host_logs.ok());
  ASSERT_EQ(host->state(), pb::JOB_STATE_SUCCEEDED) << host->message() << "\n" << *host_logs;

  auto contained = run(InImage(plain, image.name()));
  ASSERT_TRUE(contained.ok()) << contained.status();
  auto logs = cluster.Logs(contained->id());
  ASSERT_TRUE(logs.ok());
  ASSERT_EQ(contained->state(), pb::JOB_STATE_SUCCEEDED) << contained->message() << "\n" << *logs;

  // The same training, to the digit.
  ASSERT_FALSE(FinalLoss(*host_logs).empty()) << *host_logs;
  EXPECT_EQ(FinalLoss(*logs), FinalLoss(*host_logs)) << *logs;
  std::regex rank_line(R"(rank (\d+): WORLD_SIZE=4 world=4 backend=gloo)");
  EXPECT_EQ(std::distance(std::sregex_iterator(logs->begin(), logs->end(), rank_line), std::sregex_iterator()), 4)
      << *logs;

  // Each node ran its share through the runtime, in the image, as the job's account, in its cgroup
  // when the agent confines; `get` has the command line.
  ASSERT_EQ(contained->placement_size(), 2);
  for (const auto& placed : contained->placement()) {
    EXPECT_EQ(placed.image(), image.name());
    const std::string argv = absl::StrJoin(placed.runtime_argv(), " ");
    EXPECT_EQ(placed.runtime_argv(0), kPodman) << argv;
    EXPECT_NE(argv.find(absl::StrCat(kPodman, " --runtime=", kRunc, " ")), std::string::npos) << argv;
    EXPECT_NE(argv.find(" run --rm --replace --name hetpool-"), std::string::npos) << argv;
    EXPECT_NE(argv.find(" --network=host "), std::string::npos) << argv;
    EXPECT_NE(argv.find(" --cap-drop=all "), std::string::npos) << argv;
    EXPECT_NE(argv.find(" --volume /usr:/usr:ro "), std::string::npos) << argv;
    EXPECT_NE(argv.find(absl::StrCat(" ", image.name(), " torchrun --nnodes 2 ")), std::string::npos) << argv;
    // Confined: the container's cgroups go below the job's, where its limits and kills reach.
    EXPECT_EQ(placed.confinement().empty(), argv.find(" --cgroup-manager=cgroupfs run ") == std::string::npos) << argv;
    EXPECT_EQ(placed.confinement().empty(), argv.find(" --cgroup-parent /hetpool/") == std::string::npos) << argv;
    // The job's environment went through the env file, not the command line.
    EXPECT_EQ(argv.find("HPTEST_RUN_MARK"), std::string::npos) << argv;
  }
  for (const auto& plan : contained->launch_plan()) {
    EXPECT_EQ(plan.container().image(), image.name());
    EXPECT_EQ(plan.argv(0), "torchrun");  // the image's own, found on its PATH
  }
  // Nothing of the job is left running.
  EXPECT_TRUE(cluster.JobProcesses(contained->id()).empty());
}

TEST(Containers, AMissingImageFailsAsInfrastructureNamingTheImage) {
  if (std::string why = PodmanMissing(); !why.empty()) GTEST_SKIP() << why;
  TestCluster::Options options;
  options.agents = {{"node-a", std::string(HETPOOL_SOURCE_DIR) + "/deploy/examples/node-a.json"}};
  TestCluster cluster(options);
  const std::string conf = WriteContainersConf(cluster.dir());
  cluster.mutable_options().agents[0].args = RuntimeFlags(kPodman, conf);
  ASSERT_TRUE(cluster.Start().ok());
  // localhost has no registry: podman's pull fails, and says so naming the image.
  const std::string missing = absl::StrCat("localhost/hetpool-no-such-image:", getpid());
  auto submitted = cluster.Submit(InImage(cluster.TrainSpec(1, 1, {"--steps", "3"}), missing));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto job = cluster.WaitFor(
      submitted->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(120));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->state(), pb::JOB_STATE_FAILED) << job->message();
  EXPECT_EQ(job->failure_origin(), pb::FAILURE_ORIGIN_INFRASTRUCTURE) << job->message();
  EXPECT_EQ(job->failure().launch_failure(), "ContainerFailed");
  EXPECT_NE(job->message().find("container runtime failed (exit 125) running image " + missing), std::string::npos)
      << job->message();
  EXPECT_NE(job->message().find("Error: "), std::string::npos) << job->message();  // podman's own words
}

// No podman needed: the agents ask a stand-in for their inventory, which is all placement reads.
// node-a (NVIDIA, Cambricon) has a runtime; node-b (NVIDIA, MetaX) has none.
TEST(Containers, ImagesForSomeVendorsKeepTheJobToThemAndSayWhy) {
  TestCluster cluster(TestCluster::ExamplePool());
  const std::string conf = WriteContainersConf(cluster.dir());
  std::ofstream(conf + ".images") << "localhost/site/torch-cuda:2.4\n";
  const std::string fake = absl::StrCat(HETPOOL_SOURCE_DIR, "/tests/testing/fake_podman.sh");
  cluster.mutable_options().agents[0].args = RuntimeFlags(fake, conf);
  cluster.mutable_options().agents[1].args = {"--container-runtime", "none"};
  ASSERT_TRUE(cluster.Start().ok());

  // The inventory says which node has a runtime and what it holds.
  pb::ListNodesResponse nodes;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster.cluster().ListNodes(&ctx, pb::ListNodesRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 2);
  for (const auto& node : nodes.nodes()) {
    if (node.name() == "node-a") {
      EXPECT_EQ(node.inventory().container_runtime().name(), "fake_podman.sh");
      EXPECT_EQ(node.inventory().container_runtime().version(), "4.3.1-fake");
      EXPECT_EQ(std::vector<std::string>(node.inventory().images().begin(), node.inventory().images().end()),
                std::vector<std::string>{"localhost/site/torch-cuda:2.4"});
    } else {
      EXPECT_FALSE(node.inventory().has_container_runtime()) << node.name();
    }
  }

  // Only a MetaX image: the MetaX card is on the node without a runtime, so the job waits, and
  // says why for each node.
  pb::JobSpec spec = cluster.TrainSpec(1, 1, {});
  (*spec.mutable_container()->mutable_images())["metax"] = "localhost/site/torch-maca:2.4";
  auto submitted = cluster.Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto waiting = cluster.WaitFor(
      submitted->id(), [](const pb::Job& j) { return j.has_pending() && !j.pending().device_reasons().empty(); },
      absl::Seconds(30));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  const std::string why = waiting->pending().ShortDebugString();
  EXPECT_EQ(waiting->state(), pb::JOB_STATE_PENDING);
  EXPECT_FALSE(waiting->pending().never_fits()) << why;
  EXPECT_NE(waiting->pending().needs().find("metax"), std::string::npos) << why;
  EXPECT_EQ(waiting->pending().nodes_rejected().at("ContainerRuntime"), 1) << why;
  const std::string reasons = absl::StrJoin(waiting->pending().device_reasons(), "; ");
  EXPECT_NE(reasons.find("nvidia is not an allowed vendor (the job names images only for metax)"), std::string::npos)
      << why;

  // Only an Intel image, on a pool without Intel cards: refused at submission, saying so.
  (*spec.mutable_container()->mutable_images()).clear();
  (*spec.mutable_container()->mutable_images())["intel"] = "localhost/site/torch-xpu:2.4";
  auto refused = cluster.Submit(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("the job names images only for intel"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace hetpool::testing
