#include "src/daemon/state/job_validation.h"

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "google/protobuf/util/json_util.h"
#include "src/common/job_file.h"

namespace hetpool::daemon {
namespace {

hetpool::v1::JobSpec ValidSpec() {
  hetpool::v1::JobSpec spec;
  spec.set_name("train");
  spec.set_user("alice");
  spec.add_command("python3");
  spec.add_command("train.py");
  spec.set_working_dir("/work");
  spec.set_nnodes(2);
  spec.set_devices_per_node(4);
  return spec;
}

TEST(JobValidation, AcceptsValidSpecAndDefaultsProcsToDevices) {
  auto spec = ValidSpec();
  ASSERT_TRUE(ValidateAndNormalizeSpec(spec).ok());
  EXPECT_EQ(spec.procs_per_node(), 4);
}

// Each row breaks one rule; the error must be INVALID_ARGUMENT and start with the field's name.
struct BadSpecCase {
  const char* name;
  void (*mutate)(hetpool::v1::JobSpec&);
  const char* field;
};

const BadSpecCase kBadSpecs[] = {
    {"no command", [](auto& s) { s.clear_command(); }, "command"},
    {"command and python", [](auto& s) { s.mutable_python()->set_script("x.py"); }, "command"},
    {"empty program", [](auto& s) { s.set_command(0, ""); }, "command[0]"},
    {"python without script",
     [](auto& s) {
       s.clear_command();
       s.mutable_python();
     },
     "python.script"},
    {"zero nnodes", [](auto& s) { s.set_nnodes(0); }, "nnodes"},
    {"negative nnodes", [](auto& s) { s.set_nnodes(-3); }, "nnodes"},
    {"too many devices", [](auto& s) { s.set_devices_per_node(65); }, "devices_per_node"},
    {"negative devices", [](auto& s) { s.set_devices_per_node(-1); }, "devices_per_node"},
    {"cpu job without procs", [](auto& s) { s.set_devices_per_node(0); }, "procs_per_node"},
    {"unknown vendor", [](auto& s) { s.mutable_requirements()->add_vendors("nvidai"); }, "requirements.vendors[0]"},
    {"cpu vendor with devices", [](auto& s) { s.mutable_requirements()->add_vendors("cpu"); }, "devices_per_node"},
    {"negative host cpu", [](auto& s) { s.mutable_host()->set_cpu_milli_per_process(-1); },
     "host.cpu_milli_per_process"},
    {"host cpu past a node", [](auto& s) { s.mutable_host()->set_cpu_milli_per_node(1024001); },
     "host.cpu_milli_per_node"},
    {"host memory past a node", [](auto& s) { s.mutable_host()->set_memory_mib_per_process(uint64_t{1} << 40); },
     "host.memory_mib_per_process"},
    {"host cpu in all past a node", [](auto& s) { s.mutable_host()->set_cpu_milli_per_process(600000); }, "host"},
    {"no user", [](auto& s) { s.clear_user(); }, "user"},
    {"bad user", [](auto& s) { s.set_user("al ice"); }, "user"},
    {"long name", [](auto& s) { s.set_name(std::string(129, 'a')); }, "name"},
    {"relative working dir", [](auto& s) { s.set_working_dir("work"); }, "working_dir"},
    {"no working dir", [](auto& s) { s.clear_working_dir(); }, "working_dir"},
    {"reserved env", [](auto& s) { (*s.mutable_env())["HETPOOL_JOB_ID"] = "x"; }, "env[HETPOOL_JOB_ID]"},
    {"bad env name", [](auto& s) { (*s.mutable_env())["1BAD"] = "x"; }, "env[1BAD]"},
    {"huge env value", [](auto& s) { (*s.mutable_env())["BIG"] = std::string(40000, 'x'); }, "env[BIG]"},
    {"NUL in argument", [](auto& s) { s.add_command(std::string("a\0b", 3)); }, "command[2]"},
    {"huge argument", [](auto& s) { s.add_command(std::string(9000, 'x')); }, "command[2]"},
    {"bad label key", [](auto& s) { (*s.mutable_labels())["a b"] = "x"; }, "labels[a b]"},
    {"negative restarts", [](auto& s) { s.set_max_restarts(-1); }, "max_restarts"},
    {"priority out of range", [](auto& s) { s.set_priority(5000); }, "priority"},
    {"negative preemption grace", [](auto& s) { s.mutable_preemption_grace()->set_seconds(-1); }, "preemption_grace"},
    {"preemption grace past an hour", [](auto& s) { s.mutable_preemption_grace()->set_seconds(3601); },
     "preemption_grace"},
    {"negative checkpoint interval", [](auto& s) { s.mutable_checkpoint_interval()->set_nanos(-5); },
     "checkpoint_interval"},
    {"elastic min 0", [](auto& s) { s.mutable_elastic_nnodes()->set_max(2); }, "elastic_nnodes.min"},
    {"elastic max below min",
     [](auto& s) {
       s.mutable_elastic_nnodes()->set_min(3);
       s.mutable_elastic_nnodes()->set_max(2);
       s.set_nnodes(3);
     },
     "elastic_nnodes.max"},
    {"elastic nnodes not min",
     [](auto& s) {
       s.mutable_elastic_nnodes()->set_min(1);
       s.mutable_elastic_nnodes()->set_max(4);
       s.set_nnodes(2);
     },
     "nnodes"},
    {"elastic CPU job",
     [](auto& s) {
       s.mutable_elastic_nnodes()->set_min(1);
       s.mutable_elastic_nnodes()->set_max(2);
       s.set_nnodes(1);
       s.set_devices_per_node(0);
       s.set_procs_per_node(1);
     },
     "elastic_nnodes"},
    {"elastic share of a card",
     [](auto& s) {
       s.mutable_elastic_nnodes()->set_min(1);
       s.mutable_elastic_nnodes()->set_max(2);
       s.set_nnodes(1);
       s.set_devices_per_node(1);
       s.set_device_milli(500);
     },
     "elastic_nnodes"},
    {"share above a device", [](auto& s) { s.set_device_milli(1500); }, "device_milli"},
    {"share over several devices", [](auto& s) { s.set_device_milli(500); }, "device_milli"},
    {"memory without a share", [](auto& s) { s.set_device_memory_mib(1024); }, "device_memory_mib"},
    {"unknown precision", [](auto& s) { s.mutable_requirements()->add_precisions("fp7"); },
     "requirements.precisions[0]"},
    {"bad cubin target", [](auto& s) { s.mutable_requirements()->mutable_code()->add_cuda_sass("sm90"); },
     "requirements.code.cuda_sass[0]"},
    {"bad ptx target", [](auto& s) { s.mutable_requirements()->mutable_code()->add_cuda_ptx("compute_90a"); },
     "requirements.code.cuda_ptx[0]"},
    {"bad bang target", [](auto& s) { s.mutable_requirements()->mutable_code()->add_bang("mlu370"); },
     "requirements.code.bang[0]"},
    {"bad driver version", [](auto& s) { s.mutable_requirements()->set_min_driver_version("latest"); },
     "requirements.min_driver_version"},
};

TEST(JobValidation, RejectsBadSpecsNamingTheField) {
  for (const auto& c : kBadSpecs) {
    auto spec = ValidSpec();
    c.mutate(spec);
    const absl::Status s = ValidateAndNormalizeSpec(spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(std::string(s.message()).rfind(std::string(c.field) + ":", 0), 0u) << c.name << ": " << s.message();
  }
}

TEST(JobValidation, CpuJobNeedsProcsAndNoDevices) {
  auto spec = ValidSpec();
  spec.set_devices_per_node(0);
  spec.set_procs_per_node(2);
  spec.mutable_requirements()->add_vendors("cpu");
  EXPECT_TRUE(ValidateAndNormalizeSpec(spec).ok());
}

TEST(JobValidation, NodeNames) {
  EXPECT_TRUE(ValidateNodeName("node-a.rack1").ok());
  EXPECT_FALSE(ValidateNodeName("").ok());
  EXPECT_FALSE(ValidateNodeName("../etc").ok());
  EXPECT_FALSE(ValidateNodeName(".hidden").ok());
  EXPECT_FALSE(ValidateNodeName("a/b").ok());
  EXPECT_FALSE(ValidateNodeName(std::string(64, 'n')).ok());
}

TEST(JobValidation, TheCheckpointingExampleJobIsValid) {
  std::ifstream in(HETPOOL_SOURCE_DIR_FOR_TESTS "/deploy/examples/checkpointing-job.json");
  std::stringstream text;
  text << in.rdbuf();
  hetpool::v1::JobSpec spec;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &spec).ok()) << text.str();
  spec.set_user("alice");
  spec.set_working_dir("/tmp");
  ASSERT_TRUE(ValidateAndNormalizeSpec(spec).ok());
  EXPECT_EQ(spec.preemption_grace().seconds(), 60);
  EXPECT_EQ(spec.checkpoint_interval().seconds(), 10);
  EXPECT_TRUE(spec.movable());
}

TEST(JobValidation, TheElasticExampleJobIsValidWithItsNnodesRange) {
  std::ifstream in(HETPOOL_SOURCE_DIR_FOR_TESTS "/deploy/examples/elastic-job.json");
  std::stringstream text;
  text << in.rdbuf();
  auto expanded = ExpandJobFileShorthands(text.str());
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  hetpool::v1::JobSpec spec;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*expanded, &spec).ok()) << *expanded;
  spec.set_user("alice");
  spec.set_working_dir("/tmp");
  ASSERT_TRUE(ValidateAndNormalizeSpec(spec).ok());
  EXPECT_EQ(spec.nnodes(), 1);
  EXPECT_EQ(spec.elastic_nnodes().min(), 1);
  EXPECT_EQ(spec.elastic_nnodes().max(), 2);
  EXPECT_GT(spec.checkpoint_interval().seconds(), 0);
}

TEST(JobValidation, AnElasticJobsNnodesDefaultsToItsMin) {
  auto spec = ValidSpec();
  spec.clear_nnodes();
  spec.mutable_elastic_nnodes()->set_min(2);
  spec.mutable_elastic_nnodes()->set_max(4);
  ASSERT_TRUE(ValidateAndNormalizeSpec(spec).ok());
  EXPECT_EQ(spec.nnodes(), 2);
}

}  // namespace
}  // namespace hetpool::daemon

namespace hetpool::daemon {
namespace {

hetpool::v1::JobSpec MixedExample() {
  std::ifstream in(HETPOOL_SOURCE_DIR_FOR_TESTS "/deploy/examples/mixed-job.json");
  std::stringstream text;
  text << in.rdbuf();
  hetpool::v1::JobSpec spec;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &spec).ok()) << text.str();
  spec.set_user("alice");
  spec.set_working_dir("/tmp");
  return spec;
}

TEST(JobValidation, TheMixedExampleJobIsValidAndItsShapeComesFromItsGroups) {
  hetpool::v1::JobSpec spec = MixedExample();
  spec.mutable_groups(1)->set_nnodes(2);
  spec.mutable_groups(1)->set_procs_per_node(4);
  ASSERT_TRUE(ValidateAndNormalizeSpec(spec).ok());
  EXPECT_EQ(spec.nnodes(), 3);
  EXPECT_EQ(spec.devices_per_node(), 2);
  EXPECT_EQ(spec.procs_per_node(), 4);
  EXPECT_EQ(spec.groups(0).procs_per_node(), 2);  // defaulted from its cards
  EXPECT_EQ(TotalRanks(spec), 2 + 2 * 4);
  EXPECT_EQ(TotalCards(spec), 2 + 2 * 2);
  // The spec as stored passes again as it is (a job's spec submitted once more).
  hetpool::v1::JobSpec again = spec;
  ASSERT_TRUE(ValidateAndNormalizeSpec(again).ok());
  EXPECT_EQ(again.SerializeAsString(), spec.SerializeAsString());
}

TEST(JobValidation, AJobAcrossVendorsRefusesWhatItCannotCombine) {
  struct Case {
    std::function<void(hetpool::v1::JobSpec&)> edit;
    std::string expected;
  };
  const Case cases[] = {
      {[](auto& s) { s.set_nnodes(3); }, "groups: each group says its nodes and cards: leave nnodes"},
      {[](auto& s) { s.mutable_requirements()->add_vendors("nvidia"); }, "groups: each group says its requirements"},
      {[](auto& s) { s.mutable_groups(1)->set_name("h100"); }, "groups[1].name: 'h100' names two groups"},
      {[](auto& s) { s.mutable_groups(0)->set_name("a b"); }, "groups[0].name"},
      {[](auto& s) { s.mutable_groups(0)->set_devices_per_node(0); }, "groups[0].devices_per_node: must be between 1"},
      {[](auto& s) { s.mutable_groups(1)->set_nnodes(0); }, "groups[1].nnodes: must be between 1"},
      {[](auto& s) { s.mutable_groups(1)->mutable_requirements()->add_vendors("amd"); },
       "groups[1].requirements.vendors[1]: unknown vendor 'amd'"},
      {[](auto& s) { s.mutable_groups(0)->mutable_requirements()->add_precisions("fp7"); },
       "groups[0].requirements.precisions[1]"},
      {[](auto& s) { s.set_mixed_vendors(true); }, "either groups or mixed_vendors"},
      {[](auto& s) { s.set_collective("nccl"); }, "collective: unknown 'nccl'"},
      {[](auto& s) { s.set_global_batch(3); }, "global_batch: 3 samples for 4 ranks"},
      {[](auto& s) {
         s.mutable_elastic_nnodes()->set_min(1);
         s.mutable_elastic_nnodes()->set_max(2);
       },
       "elastic_nnodes"},
      {[](auto& s) {
         s.mutable_groups(0)->set_devices_per_node(1);
         s.mutable_groups(1)->set_devices_per_node(1);
         s.set_global_batch(0);
         s.set_device_milli(500);
       },
       "groups: takes whole cards"},
  };
  for (const auto& c : cases) {
    hetpool::v1::JobSpec spec = MixedExample();
    c.edit(spec);
    const absl::Status s = ValidateAndNormalizeSpec(spec);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.expected << ": " << s;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
  }
  // mixed_vendors: cards required; collective only for jobs across vendors.
  hetpool::v1::JobSpec mixed = ValidSpec();
  mixed.set_mixed_vendors(true);
  mixed.set_collective("gloo");
  EXPECT_TRUE(ValidateAndNormalizeSpec(mixed).ok());
  mixed.set_devices_per_node(0);
  mixed.set_procs_per_node(1);
  EXPECT_FALSE(ValidateAndNormalizeSpec(mixed).ok());
  hetpool::v1::JobSpec one_vendor = ValidSpec();
  one_vendor.set_collective("gloo");
  EXPECT_NE(ValidateAndNormalizeSpec(one_vendor).message().find("collective: only for a job across vendors"),
            std::string::npos);
}

}  // namespace
}  // namespace hetpool::daemon
