// The launch adapter (issue 62): which steps each vendor's node gets, what the job's events say,
// and, through a real Python with Debian's PyTorch, that the start-up file does what it says:
// the vendors' own switches are thrown as they document them (fake torch_mlu and
// intel_extension_for_pytorch record it), cuda and nccl are mapped on CPU, a Python that never
// imports torch pays nothing, and the sitecustomize it shadows still runs.
#include "src/agent/launch_adapter.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/agent/program_run.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::agent {
namespace {

namespace pb = ::hetpool::v1;

pb::NodeLaunchPlan Plan(const std::string& vendor, bool adapt = true) {
  pb::NodeLaunchPlan plan;
  plan.set_vendor(vendor);
  plan.set_adapt(adapt);
  return plan;
}

LaunchSpec Adapted(const pb::NodeLaunchPlan& plan, AdapterContext context,
                   std::map<std::string, std::string> env = {}) {
  LaunchSpec spec;
  spec.env = std::move(env);
  if (context.dir.empty()) context.dir = "/var/lib/hetpool-agent/adapter";
  AdaptLaunch(plan, context, spec);
  return spec;
}

TEST(LaunchAdapter, EachVendorGetsItsStepsAndTheEventsSaySo) {
  const LaunchSpec nvidia = Adapted(Plan("nvidia"), {});
  EXPECT_EQ(nvidia.env.count("HETPOOL_ADAPT"), 0u);
  EXPECT_EQ(nvidia.note, "not adapted: cuda and nccl are this card's own");
  EXPECT_EQ(nvidia.env.at("PYTHONPATH"), "/var/lib/hetpool-agent/adapter");  // stderr merged all the same
  EXPECT_EQ(nvidia.env.at("HETPOOL_MERGE_STDERR"), "1");
  EXPECT_EQ(Adapted(Plan("metax"), {}).note, "not adapted: MACA's PyTorch answers to cuda and nccl");

  const LaunchSpec cambricon = Adapted(Plan("cambricon"), {});
  EXPECT_EQ(cambricon.env.at("HETPOOL_ADAPT"), "torch_mlu");
  EXPECT_EQ(cambricon.note, "adapted: cuda→mlu, nccl→cncl (torch_mlu's GPU migration)");
  const LaunchSpec intel = Adapted(Plan("intel"), {});
  EXPECT_EQ(intel.env.at("HETPOOL_ADAPT"), "ipex,map:xpu:auto");
  EXPECT_EQ(intel.note, "adapted: intel_extension_for_pytorch loaded; cuda→xpu, nccl→xccl or ccl");
  EXPECT_EQ(Adapted(Plan("cpu"), {}).env.at("HETPOOL_ADAPT"), "map:cpu:gloo");

  // Simulated cards run on CPU: the vendor's own switch, then CPU's mapping.
  EXPECT_EQ(Adapted(Plan("cambricon"), {.simulated = true}).env.at("HETPOOL_ADAPT"), "torch_mlu,map:cpu:gloo");
  EXPECT_EQ(Adapted(Plan("intel"), {.simulated = true}).env.at("HETPOOL_ADAPT"), "ipex,map:cpu:gloo");
  const LaunchSpec simulated = Adapted(Plan("nvidia"), {.simulated = true});
  EXPECT_EQ(simulated.env.at("HETPOOL_ADAPT"), "map:cpu:gloo");
  EXPECT_EQ(simulated.note, "adapted: cuda→cpu, nccl→gloo");
}

TEST(LaunchAdapter, OffPerJobPerNodeAndInImages) {
  const LaunchSpec job_off = Adapted(Plan("cambricon", /*adapt=*/false), {}, {{"HETPOOL_ADAPT", "map:cpu:gloo"}});
  EXPECT_EQ(job_off.env.count("HETPOOL_ADAPT"), 0u);  // not even one the job set itself
  EXPECT_EQ(job_off.note, "not adapted (the job's \"adapt\": false)");
  const LaunchSpec node_off = Adapted(Plan("cambricon"), {.node_allows = false});
  EXPECT_EQ(node_off.env.count("HETPOOL_ADAPT"), 0u);
  EXPECT_EQ(node_off.note, "not adapted: off on this node (hetpool-agent --adapt=false)");
  pb::NodeLaunchPlan image = Plan("cambricon");
  image.mutable_container()->set_image("cambricon/pytorch:2.7-mlu");
  const LaunchSpec in_image = Adapted(image, {});
  EXPECT_EQ(in_image.env.count("PYTHONPATH"), 0u);
  EXPECT_EQ(in_image.note, "not adapted: it runs in an image");
  // The job's own path stays, after the adapter's.
  EXPECT_EQ(Adapted(Plan("cpu"), {}, {{"PYTHONPATH", "/srv/lib"}}).env.at("PYTHONPATH"),
            "/var/lib/hetpool-agent/adapter:/srv/lib");
}

// Runs `code` in Debian's Python with the adapter (installed into `dir`/adapter) first on its
// path, then `extra_path`; the output, or why it could not run.
ProgramOutput RunPython(const std::string& dir, const std::string& steps, const std::string& code,
                        const std::string& extra_path, std::map<std::string, std::string> env = {}) {
  EXPECT_TRUE(InstallLaunchAdapter(dir + "/adapter").ok());
  env["PYTHONPATH"] = absl::StrCat(dir, "/adapter:", extra_path);
  env["HETPOOL_ADAPT"] = steps;
  env["PATH"] = "/usr/bin:/bin";
  return RunProgram({"/usr/bin/python3", "-c", code}, absl::Seconds(120), {.env = env, .with_stderr = true});
}

bool HaveTorch() {
  const ProgramOutput run = RunProgram({"/usr/bin/python3", "-c", "import torch"}, absl::Seconds(120));
  return run.end == ProgramOutput::End::kExited && run.exit_code == 0;
}

TEST(LaunchAdapter, TheStartUpFileThrowsTheVendorsSwitchesAndMapsCudaOnCpu) {
  if (!HaveTorch()) GTEST_SKIP() << "Debian's python3-torch is not installed (deploy/lib/common.sh installs it)";
  testing::TempDir dir;
  const std::string fakes = std::string(HETPOOL_SOURCE_DIR_FOR_TESTS) + "/tests/fakes/python";
  const std::string tutorial_lines =
      "import torch, torch.distributed as dist\n"
      "torch.cuda.set_device(0)\n"
      "dist.init_process_group('nccl', init_method='file://" +
      dir.path() +
      "/store', rank=0, world_size=1)\n"
      "model = torch.nn.Linear(4, 2).to(0)\n"
      "ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])\n"
      "x = torch.randn(3, 4, device='cuda:0')\n"
      "print(dist.get_backend(), ddp(x).sum().item() == ddp(x.cuda()).sum().item(), torch.cuda.is_available())\n";
  const ProgramOutput mapped = RunPython(dir.path(), "ipex,map:cpu:gloo", tutorial_lines, fakes,
                                         {{"FAKE_IPEX_MARKS", dir.path()}, {"RANK", "0"}});
  ASSERT_EQ(mapped.exit_code, 0) << mapped.output;
  EXPECT_EQ(mapped.output, "gloo True True\n");
  std::ifstream ipex(dir.path() + "/imported-0");
  std::string line;
  ASSERT_TRUE(std::getline(ipex, line)) << "intel_extension_for_pytorch was not imported";
  EXPECT_EQ(line, "torch imported first");  // as Intel says: right after torch

  const ProgramOutput mlu =
      RunPython(dir.path(), "torch_mlu", "import torch", fakes, {{"FAKE_TORCH_MLU_MARKS", dir.path()}, {"RANK", "3"}});
  ASSERT_EQ(mlu.exit_code, 0) << mlu.output;
  std::ifstream migrated(dir.path() + "/migrated-3");
  ASSERT_TRUE(std::getline(migrated, line)) << "torch_mlu.utils.gpu_migration was not imported";
  // Without torch_mlu installed the job is told, and runs as written.
  const ProgramOutput missing = RunPython(dir.path(), "torch_mlu", "import torch; print('ran')", "");
  EXPECT_EQ(missing.exit_code, 0) << missing.output;
  EXPECT_NE(missing.output.find("Cambricon's GPU migration is not available here"), std::string::npos)
      << missing.output;
}

TEST(LaunchAdapter, APythonThatNeverImportsTorchPaysNothingAndTheShadowedSiteCustomizeRuns) {
  testing::TempDir dir;
  const std::string theirs = dir.path() + "/theirs";
  mkdir(theirs.c_str(), 0755);
  std::ofstream(theirs + "/sitecustomize.py") << "import builtins\nbuiltins.THEIRS_RAN = True\n";
  const ProgramOutput run = RunPython(
      dir.path(), "map:cpu:gloo", "import sys, builtins; print('torch' in sys.modules, builtins.THEIRS_RAN)", theirs);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "False True\n");
}

}  // namespace
}  // namespace hetpool::agent
