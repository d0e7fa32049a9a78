// Jobs in container images, short of a runtime: what a JobSpec may ask (container_spec.h), and
// what the agent makes of it (container_runtime.h): the runtime's command line, the env file, the
// mounts it lets through, the device files, and the runtime's own error.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "src/agent/container_runtime.h"
#include "src/common/container_spec.h"
#include "src/common/convert.h"
#include "tests/testing/temp_dir.h"

namespace hetpool {
namespace {

namespace pb = ::hetpool::v1;

pb::JobSpec WithImages(std::initializer_list<std::pair<const char*, const char*>> images) {
  pb::JobSpec spec;
  spec.set_devices_per_node(1);
  for (const auto& [vendor, image] : images) (*spec.mutable_container()->mutable_images())[vendor] = image;
  return spec;
}

TEST(ContainerSpec, SaysWhatIsWrongWithAContainer) {
  struct Case {
    pb::JobSpec spec;
    std::string error;  // "" = valid
  };
  auto mount = [](pb::JobSpec spec, const std::string& source, const std::string& target = "") {
    auto* m = spec.mutable_container()->add_mounts();
    m->set_source(source);
    m->set_target(target);
    return spec;
  };
  pb::JobSpec nvidia_only = WithImages({{"metax", "site/torch-maca:2.4"}});
  nvidia_only.mutable_requirements()->add_vendors("nvidia");
  pb::JobSpec cpu_job = WithImages({{"nvidia", "site/torch:2.4"}});
  cpu_job.set_devices_per_node(0);
  pb::JobSpec relative_workdir = WithImages({{"*", "a:1"}});
  relative_workdir.mutable_container()->set_workdir("work");
  pb::JobSpec empty;
  empty.mutable_container();
  const Case cases[] = {
      {WithImages({{"*", "registry.example:5000/team/torch:2.4-cu12"}}), ""},
      {WithImages({{"nvidia", "localhost/x@sha256:0a1b"}, {"metax", "m:1"}}), ""},
      {mount(WithImages({{"*", "a:1"}}), "/data", "/mnt/data"), ""},
      {empty, "container.images: required"},
      {WithImages({{"amd", "a:1"}}), "container.images[amd]: not a vendor"},
      {WithImages({{"*", "--privileged"}}), "may not start with '-' or '/'"},
      {WithImages({{"*", "a b"}}), "is not an image name"},
      {WithImages({{"*", ""}}), "empty image name"},
      {mount(WithImages({{"*", "a:1"}}), "data"), "container.mounts[0].source: an absolute path"},
      {mount(WithImages({{"*", "a:1"}}), "/data/../etc"), "container.mounts[0].source: an absolute path"},
      {mount(WithImages({{"*", "a:1"}}), "/a,b"), "container.mounts[0].source: an absolute path"},
      {mount(WithImages({{"*", "a:1"}}), "/data", "/dev/nvidia0"), "may not be /, /proc, /sys or /dev"},
      {mount(WithImages({{"*", "a:1"}}), "/data", "/proc"), "may not be /, /proc, /sys or /dev"},
      {mount(mount(WithImages({{"*", "a:1"}}), "/data"), "/data"), "mounted twice"},
      {relative_workdir, "container.workdir: an absolute path"},
      {nvidia_only,
       "no image for any vendor requirements.vendors allows (nvidia); the job names images only for metax"},
      {cpu_job, "a CPU job (devices_per_node 0) needs an image for \"cpu\" or \"*\""},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateContainerSpec(c.spec);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << c.spec.ShortDebugString() << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.spec.ShortDebugString();
      EXPECT_NE(s.message().find(c.error), std::string::npos) << s << "\nwanted: " << c.error;
    }
  }
}

TEST(ContainerSpec, ImagesNameTheVendorsAJobMayRunOn) {
  const pb::JobSpec some = WithImages({{"metax", "m:1"}, {"cambricon", "c:1"}});
  EXPECT_EQ(ImageVendors(some.container()), (std::set<Vendor>{Vendor::kMetax, Vendor::kCambricon}));
  EXPECT_EQ(ImageFor(some.container(), Vendor::kMetax), "m:1");
  EXPECT_EQ(ImageFor(some.container(), Vendor::kNvidia), "");
  const pb::JobSpec every = WithImages({{"*", "any:1"}, {"metax", "m:1"}});
  EXPECT_EQ(ImageVendors(every.container()), std::nullopt);
  EXPECT_EQ(ImageFor(every.container(), Vendor::kNvidia), "any:1");
  EXPECT_EQ(ImageFor(every.container(), Vendor::kMetax), "m:1");  // a vendor's own wins over "*"
  EXPECT_EQ(ImageVendorsReason({Vendor::kMetax, Vendor::kCambricon}), "the job names images only for metax, cambricon");
}

TEST(ContainerSpec, TheInventorysRuntimeAndImagesAreCheckedOnTheWayIn) {
  pb::NodeInventory in;
  in.mutable_container_runtime()->set_name("podman");
  in.mutable_container_runtime()->set_version("4.3.1");
  in.add_images("localhost/a:1");
  in.add_images("registry.site:5000/team/torch@sha256:0a");
  auto inventory = FromProto(in);
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_EQ(inventory->container_runtime, "podman");
  EXPECT_EQ(inventory->images, (std::set<std::string>{"localhost/a:1", "registry.site:5000/team/torch@sha256:0a"}));
  EXPECT_EQ(ToProto(*inventory).ShortDebugString(), in.ShortDebugString());
  pb::NodeInventory bad_image = in;
  bad_image.add_images("--privileged");
  EXPECT_NE(FromProto(bad_image).status().message().find("inventory.images"), std::string::npos);
  pb::NodeInventory no_runtime;
  no_runtime.add_images("localhost/a:1");
  EXPECT_EQ(FromProto(no_runtime).status().message(), "inventory.images: listed without a container_runtime");
  pb::NodeInventory bad_name = in;
  bad_name.mutable_container_runtime()->set_name("pod man");
  EXPECT_FALSE(FromProto(bad_name).ok());
}

}  // namespace

namespace agent {
namespace {

TEST(ContainerRuntime, RunsTheImageAsTheJobsAccountWithExactlyItsCards) {
  ContainerRuntime runtime({"/usr/bin/podman", {"--runtime=/usr/sbin/runc"}, "/etc/hetpool/containers.conf", {}});
  ContainerRun run;
  run.name = "hetpool-node-a-job-000001-g1";
  run.image = "site/torch:2.4";
  run.uid = 61184;
  run.gid = 61184;
  run.groups = {44};
  run.cgroup_parent = "/hetpool/node-a-1f2e/job-000001-g1";
  run.env_file = "/var/lib/agent/logs/job-000001/g1/node.log.env";
  run.workdir = "/work";
  run.devices = {"/dev/nvidia3", "/dev/nvidiactl"};
  run.mounts = {{"/work", "/work", false},
                {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", true}};
  run.command = {"torchrun", "--nnodes", "2", "train.py"};
  EXPECT_EQ(absl::StrJoin(runtime.RunArgv(run), " "),
            "/usr/bin/podman --runtime=/usr/sbin/runc --cgroup-manager=cgroupfs run --rm --replace --name "
            "hetpool-node-a-job-000001-g1 --network=host --uts=host --pid=host --log-driver=none --user 61184:61184 "
            "--cap-drop=all --security-opt=no-new-privileges --shm-size=8g --env-file "
            "/var/lib/agent/logs/job-000001/g1/node.log.env --group-add 44 --cgroup-parent "
            "/hetpool/node-a-1f2e/job-000001-g1 --device /dev/nvidia3 --device /dev/nvidiactl --volume /work:/work "
            "--volume /usr/lib/x86_64-linux-gnu/libcuda.so.1:/usr/lib/x86_64-linux-gnu/libcuda.so.1:ro --workdir /work "
            "site/torch:2.4 torchrun --nnodes 2 train.py");
  // Unconfined: no cgroup options at all (podman's own default manager then).
  run.cgroup_parent.clear();
  const std::string unconfined = absl::StrJoin(runtime.RunArgv(run), " ");
  EXPECT_EQ(unconfined.find("cgroup"), std::string::npos) << unconfined;
  // The runtime's own environment is fixed: nothing of the job's reaches a root process.
  EXPECT_EQ(runtime.Environment(), (std::map<std::string, std::string>{
                                       {"CONTAINERS_CONF", "/etc/hetpool/containers.conf"},
                                       {"HOME", "/root"},
                                       {"LANG", "C.UTF-8"},
                                       {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}));
}

TEST(ContainerRuntime, TheEnvFileCarriesValuesButRefusesNewlines) {
  auto text = EnvFileText({{"A", "1"}, {"B", "two words = fine"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "A=1\nB=two words = fine\n");
  auto refused = EnvFileText({{"SECRET", "line1\nline2"}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("SECRET"), std::string::npos);
}

TEST(ContainerRuntime, ReadsTheRuntimesLastErrorLine) {
  EXPECT_EQ(RuntimeError("Trying to pull localhost/x:1...\n"
                         "time=\"...\" level=warning msg=\"Failed, retrying in 1s ... (1/3). Error: first\"\n"
                         "Error: initializing source docker://localhost/x:1: connection refused\n"),
            "Error: initializing source docker://localhost/x:1: connection refused");
  EXPECT_EQ(RuntimeError("step 3 loss 0.1\n"), "");
}

TEST(ContainerRuntime, MountsResolveInsideJobDirsOrReadOnlyMountDirs) {
  testing::TempDir jobs, tools, outside;
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(jobs.path()) / "data");
  fs::create_directories(fs::path(tools.path()) / "sdk");
  fs::create_directories(fs::path(outside.path()) / "secret");
  // A link the job planted in its own dir, pointing out of it.
  fs::create_directory_symlink(fs::path(outside.path()) / "secret", fs::path(jobs.path()) / "escape");
  const std::vector<std::string> job_dirs = {jobs.path()}, mount_dirs = {tools.path()};
  auto ok =
      ResolveMounts({{jobs.path() + "/data", "/data", false}, {tools.path() + "/sdk", "", true}}, job_dirs, mount_dirs);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].source, fs::canonical(fs::path(jobs.path()) / "data").string());
  EXPECT_EQ((*ok)[0].target, "/data");
  EXPECT_EQ((*ok)[1].target, tools.path() + "/sdk");  // target defaults to the source as written
  auto escape = ResolveMounts({{jobs.path() + "/escape", "/x", true}}, job_dirs, mount_dirs);
  EXPECT_EQ(escape.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(escape.status().message().find("outside the agent's --job-dirs and --container-mount-dirs"),
            std::string::npos)
      << escape.status();
  auto writable = ResolveMounts({{tools.path() + "/sdk", "/sdk", false}}, job_dirs, mount_dirs);
  EXPECT_NE(writable.status().message().find("only read-only here"), std::string::npos) << writable.status();
  auto missing = ResolveMounts({{jobs.path() + "/nothing", "/n", true}}, job_dirs, mount_dirs);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ContainerRuntime, SharedDeviceFilesAreThoseThatExist) {
  testing::TempDir dev;
  namespace fs = std::filesystem;
  // Character devices stand in through links to /dev/null (stat follows them); a plain file does not.
  fs::create_symlink("/dev/null", fs::path(dev.path()) / "nvidiactl");
  fs::create_symlink("/dev/null", fs::path(dev.path()) / "nvidia-uvm");
  std::ofstream(fs::path(dev.path()) / "nvidia-uvm-tools") << "not a device";
  fs::create_symlink("/dev/null", fs::path(dev.path()) / "cambricon_ctl");
  EXPECT_EQ(SharedDeviceFiles(Vendor::kNvidia, dev.path()),
            (std::vector<std::string>{dev.path() + "/nvidiactl", dev.path() + "/nvidia-uvm"}));
  EXPECT_EQ(SharedDeviceFiles(Vendor::kCambricon, dev.path()),
            (std::vector<std::string>{dev.path() + "/cambricon_ctl"}));
  EXPECT_TRUE(SharedDeviceFiles(Vendor::kMetax, dev.path()).empty());
  EXPECT_TRUE(SharedDeviceFiles(Vendor::kIntel, dev.path()).empty());
}

TEST(ContainerRuntime, AskedForItsVersionAndImagesFromTheRuntimeItself) {
  testing::TempDir dir;
  const std::string conf = dir.path() + "/containers.conf";
  std::ofstream(conf) << "";
  std::ofstream(conf + ".images") << "localhost/a:1\n<none>:<none>\nsite/b:2\n";
  ContainerRuntime runtime({std::string(HETPOOL_SOURCE_DIR_FOR_TESTS) + "/tests/testing/fake_podman.sh", {}, conf, {}});
  auto facts = runtime.Facts();
  ASSERT_TRUE(facts.ok()) << facts.status();
  EXPECT_EQ(facts->name, "fake_podman.sh");
  EXPECT_EQ(facts->version, "4.3.1-fake");
  EXPECT_EQ(facts->images, (std::set<std::string>{"localhost/a:1", "site/b:2"}));
  // Cached until invalidated (a job may have pulled one).
  std::ofstream(conf + ".images") << "site/c:3\n";
  EXPECT_EQ(runtime.Facts()->images.size(), 2u);
  runtime.Invalidate();
  EXPECT_EQ(runtime.Facts()->images, (std::set<std::string>{"site/c:3"}));
  ContainerRuntime broken({"/bin/false", {}, "", {}});
  EXPECT_FALSE(broken.Facts().ok());
}

}  // namespace
}  // namespace agent
}  // namespace hetpool
