// The Python client (python/) as a user installs it: the wheel built with the standard tools from
// the staged package, installed into a fresh directory, and its own tests
// (tests/python/client_test.py) run against a live hetpoold over TLS with a user's token.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"
#include "tests/testing/read_file.h"

namespace hetpool::testing {
namespace {

namespace pb = ::hetpool::v1;

// Runs argv to completion; its exit status (-1 when it could not run or took too long).
int RunToEnd(const std::vector<std::string>& argv, const std::string& log,
             const std::vector<std::pair<std::string, std::string>>& env = {}) {
  auto child = ChildProcess::Spawn(argv, log, env);
  if (!child.ok()) return -1;
  auto status = (*child)->Wait(absl::Minutes(5));
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

TEST(PythonClient, TheInstalledWheelSubmitsWaitsFollowsAndFailsTypedOverTlsWithAToken) {
  const std::string package = HETPOOL_PYTHON_PACKAGE_DIR;
  if (!std::filesystem::exists(package + "/hetpool/v1/job_pb2_grpc.py")) {
    GTEST_SKIP() << "the Python package was not staged (grpc_python_plugin missing when CMake ran)";
  }
  auto options = TestCluster::ExamplePool();
  options.tls = true;
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.DaemonLog();
  auto token = cluster.AddToken("pat", "", "user");
  ASSERT_TRUE(token.ok()) << token.status();
  // The daemon picks the token file up on its own: wait until the token is known.
  auto jobs = pb::JobService::NewStub(cluster.ChannelAs(*token));
  grpc::Status known;
  Eventually(
      [&] {
        grpc::ClientContext ctx;
        pb::ListJobsResponse resp;
        known = jobs->ListJobs(&ctx, pb::ListJobsRequest(), &resp);
        return known.error_code() != grpc::StatusCode::UNAUTHENTICATED;
      },
      absl::Seconds(30));
  ASSERT_TRUE(known.ok()) << known.error_message();

  const std::string wheels = cluster.dir() + "/wheels", site = cluster.dir() + "/site";
  const std::string log = cluster.dir() + "/python.log";
  ASSERT_EQ(RunToEnd({"/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
                      wheels, package},
                     log),
            0)
      << ReadAll(log);
  std::string wheel;
  for (const auto& entry : std::filesystem::directory_iterator(wheels)) wheel = entry.path().string();
  ASSERT_NE(wheel.find("hetpool-"), std::string::npos) << wheel;
  ASSERT_EQ(
      RunToEnd({"/usr/bin/python3", "-m", "pip", "install", "--no-deps", "--no-index", "--target", site, wheel}, log),
      0)
      << ReadAll(log);
  ASSERT_EQ(RunToEnd({"/usr/bin/python3", HETPOOL_SOURCE_DIR "/tests/python/client_test.py"}, log,
                     {{"PYTHONPATH", site},
                      {"HETPOOL_SERVER", cluster.address()},
                      {"HETPOOL_TLS_CA", cluster.PkiDir() + "/ca.pem"},
                      {"HETPOOL_TOKEN", *token},
                      {"HETPOOL_SOURCE_DIR", HETPOOL_SOURCE_DIR}}),
            0)
      << ReadAll(log) << cluster.DaemonLog();
}

}  // namespace
}  // namespace hetpool::testing
