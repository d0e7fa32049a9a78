#include "tests/testing/cluster_harness.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "src/common/grpc_status.h"

namespace hetpool::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool ZombieOrGone(const std::string& stat) {
  const auto close_paren = stat.rfind(')');
  return close_paren == std::string::npos || stat.size() < close_paren + 3 || stat[close_paren + 2] == 'Z';
}

std::unique_ptr<grpc::ClientContext> Ctx(absl::Duration timeout = absl::Seconds(10)) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return ctx;
}

}  // namespace

bool ProcessAlive(pid_t pid) { return !ZombieOrGone(ReadFile("/proc/" + std::to_string(pid) + "/stat")); }

std::vector<MarkedProcess> MarkedProcesses(const std::string& marker) {
  std::vector<MarkedProcess> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (ZombieOrGone(ReadFile(entry.path() / "stat"))) continue;
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    MarkedProcess p;
    bool marked = false;
    std::string var;
    while (std::getline(environ, var, '\0')) {
      marked |= var == marker;
      const auto eq = var.find('=');
      if (eq != std::string::npos) p.env[var.substr(0, eq)] = var.substr(eq + 1);
    }
    if (!marked) continue;
    p.pid = static_cast<pid_t>(std::stol(name));
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<pb::Job> SubmitToAnyReplica(const std::vector<pb::JobService::Stub*>& replicas,
                                           const pb::SubmitJobRequest& request, absl::Duration patience) {
  for (absl::Time deadline = absl::Now() + patience; absl::Now() < deadline;) {
    for (pb::JobService::Stub* stub : replicas) {
      if (stub == nullptr) continue;
      pb::SubmitJobResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
      if (stub->SubmitJob(&ctx, request, &resp).ok()) return resp.job();
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no replica acknowledged ", request.request_id(), " within ", absl::FormatDuration(patience)));
}

std::shared_ptr<grpc::Channel> FastReconnectChannel(const std::string& address) {
  // Not ReconnectBackoff() (src/common/channel_backoff.h), which leaves
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS at gRPC's 20 s for handshakes to distant servers. With it,
  // both HighAvailability tests saw every replica refuse for their whole patience, though the
  // replicas were up: these channels are made before their replicas listen and outlive a killed
  // leader, and by gRPC's maintainers' account (grpc#11411) the core waits up to that long after
  // a refused attempt before the next. Loopback needs no long handshake.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log_path,
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment, with `env` over it, built here: nothing allocates between the fork and the
  // exec (a test's other threads may hold the allocator's lock at the fork).
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    const std::string name = var.substr(0, var.find('='));
    bool overridden = false;
    for (const auto& [k, v] : env) overridden = overridden || k == name;
    if (!overridden) vars.push_back(var);
  }
  for (const auto& [k, v] : env) vars.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  // posix_spawn: no copy of this process's page tables (the fleet bench holds thousands of
  // simulated nodes, and a fork of it took most of a second of the daemon's measured restart).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int failed = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (failed != 0) return absl::ErrnoToStatus(failed, absl::StrCat("posix_spawn ", argv[0]));
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

void ChildProcess::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!reaped_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return status;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return 0;
}

ChildProcess::~ChildProcess() {
  if (reaped_) return;
  Signal(SIGTERM);
  if (!Wait(absl::Seconds(20))) {
    Signal(SIGKILL);
    Wait(absl::Seconds(5));
  }
}

std::pair<int, std::string> RunRefusedDaemon(const std::string& flags) {
  const std::string command = std::string(HETPOOLD_BIN) + " --insecure --listen 127.0.0.1:0 --data-dir " +
                              ::testing::TempDir() + "/refused " + flags + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TestCluster::Options TestCluster::ExamplePool() {
  Options options;
  options.agents = {{"node-a", std::string(HETPOOL_SOURCE_DIR) + "/deploy/examples/node-a.json"},
                    {"node-b", std::string(HETPOOL_SOURCE_DIR) + "/deploy/examples/node-b.json"}};
  return options;
}

TestCluster::TestCluster(Options options) : options_(std::move(options)) {
  for (size_t i = 0; i < options_.agents.size(); ++i) {
    if (!options_.agents[i].inventory_file.empty()) {
      std::filesystem::copy_file(options_.agents[i].inventory_file, InventoryPath(i));
    }
  }
  agents_.resize(options_.agents.size());
  // Rendezvous ports away from other test runs (a window picked from this process id) and below
  // the kernel's ephemeral range (32768 and up), where client sockets and FreeTcpPort() live:
  // torchrun could not bind a port some connection happens to hold.
  rdzv_base_ = 11000 + static_cast<int>(getpid() % 400) * 50;
}

TestCluster::~TestCluster() {
  // Agents first: they stop their job processes on SIGTERM.
  for (auto& agent : agents_) agent.reset();
  // Close our own connection first: gRPC's server shutdown lingers on open client connections.
  jobs_.reset();
  cluster_.reset();
  channel_.reset();
  daemon_.reset();
}

std::string TestCluster::InventoryPath(size_t index) const {
  return dir() + "/inventory-" + options_.agents[index].name + ".json";
}

namespace {

// Where the tests' jobs work (the source tree and /tmp, unless the test names its own) and,
// when tests run as root, root jobs.
std::vector<std::string> TestSandboxFlags(const std::string& job_dirs = "") {
  return {"--job-dirs", job_dirs.empty() ? absl::StrCat(HETPOOL_SOURCE_DIR, ",/tmp") : job_dirs, "--run-as", "root"};
}

}  // namespace

std::vector<std::string> PlainAgentFlags(const std::string& job_dirs) {
  std::vector<std::string> flags = {"--insecure"};
  for (auto& flag : TestSandboxFlags(job_dirs)) flags.push_back(std::move(flag));
  return flags;
}

absl::Status TestCluster::MakePki() {
  auto run = [this](const std::vector<std::string>& argv) -> absl::Status {
    auto child = ChildProcess::Spawn(argv, dir() + "/pki.log");
    if (!child.ok()) return child.status();
    auto status = (*child)->Wait(absl::Seconds(30));
    if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
      return absl::InternalError(absl::StrCat(argv[0], " ", argv[1], " failed:\n", ReadFile(dir() + "/pki.log")));
    }
    return absl::OkStatus();
  };
  const std::string pki = std::string(HETPOOL_SOURCE_DIR) + "/deploy/pki.sh";
  if (auto s = run({"/bin/bash", pki, "init-ca", PkiDir()}); !s.ok()) return s;
  if (auto s = run({"/bin/bash", pki, "server", PkiDir(), "hetpoold"}); !s.ok()) return s;
  for (const auto& agent : options_.agents) {
    if (auto s = run({"/bin/bash", pki, "node", PkiDir(), agent.name}); !s.ok()) return s;
  }
  auto token = AddToken("admin", "ops", "admin");
  if (!token.ok()) return token.status();
  admin_token_ = *token;
  return absl::OkStatus();
}

absl::StatusOr<std::string> TestCluster::AddToken(const std::string& user, const std::string& group,
                                                  const std::string& role) const {
  const std::string out = dir() + "/token.out";
  std::filesystem::remove(out);
  std::vector<std::string> argv = {HETPOOLCTL_BIN, "admin", "token",  "--file", TokenFile(),
                                   "--user",       user,    "--role", role};
  if (!group.empty()) argv.insert(argv.end(), {"--group", group});
  auto child = ChildProcess::Spawn(argv, out);
  if (!child.ok()) return child.status();
  auto status = (*child)->Wait(absl::Seconds(30));
  std::string token = ReadFile(out);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0 || token.rfind("hp_", 0) != 0) {
    return absl::InternalError("hetpoolctl admin token failed: " + token);
  }
  return token;
}

std::shared_ptr<grpc::Channel> TestCluster::ChannelAs(const std::string& token, const std::string& cert_name) const {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ReadFile(PkiDir() + "/ca.pem");
  if (!cert_name.empty()) {
    tls.pem_cert_chain = ReadFile(PkiDir() + "/" + cert_name + ".pem");
    tls.pem_private_key = ReadFile(PkiDir() + "/" + cert_name + ".key");
  }
  auto credentials = grpc::SslCredentials(tls);
  if (!token.empty()) {
    credentials = grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(token));
  }
  return grpc::CreateChannel(address(), credentials);
}

void TestCluster::Connect() {
  channel_ =
      options_.tls ? ChannelAs(admin_token_) : grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
  jobs_ = pb::JobService::NewStub(channel_);
  cluster_ = pb::ClusterService::NewStub(channel_);
}

absl::Status TestCluster::StartDaemon(int port, absl::Duration patience) {
  const std::string port_file = dir() + "/daemon.port";
  std::filesystem::remove(port_file);
  std::vector<std::string> argv = {HETPOOLD_BIN,
                                   "--listen",
                                   absl::StrCat("127.0.0.1:", port),
                                   "--data-dir",
                                   dir() + "/daemon",
                                   "--port-file",
                                   port_file,
                                   "--lease-ttl",
                                   absl::StrCat(absl::ToInt64Milliseconds(options_.lease_ttl), "ms"),
                                   "--orphan-grace",
                                   absl::StrCat(absl::ToInt64Milliseconds(options_.orphan_grace), "ms"),
                                   "--rdzv-port-range",
                                   absl::StrCat(rdzv_base_, "-", rdzv_base_ + 49)};
  if (options_.tls) {
    if (admin_token_.empty()) {
      if (auto made = MakePki(); !made.ok()) return made;
    }
    argv.insert(argv.end(), {"--tls-ca", PkiDir() + "/ca.pem", "--tls-cert", PkiDir() + "/hetpoold.pem", "--tls-key",
                             PkiDir() + "/hetpoold.key", "--tokens", TokenFile()});
  } else {
    argv.push_back("--insecure");
  }
  argv.insert(argv.end(), options_.daemon_args.begin(), options_.daemon_args.end());
  auto daemon = ChildProcess::Spawn(argv, dir() + "/daemon.log", options_.daemon_env);
  if (!daemon.ok()) return daemon.status();
  daemon_ = *std::move(daemon);
  for (absl::Time deadline = absl::Now() + patience; absl::Now() < deadline;) {
    if (std::filesystem::exists(port_file)) {
      port_ = std::atoi(ReadFile(port_file).c_str());
      Connect();
      // On etcd the daemon serves once elected: wait until it answers. The probe is the
      // cheapest call (one job), so that in a pool of thousands of nodes it measures the
      // daemon's readiness, not the size of a node listing.
      while (absl::Now() < deadline) {
        pb::ListJobsRequest one;
        one.set_page_size(1);
        pb::ListJobsResponse answer;
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
        if (jobs_->ListJobs(&ctx, one, &answer).ok()) return absl::OkStatus();
        absl::SleepFor(absl::Milliseconds(50));
      }
      return absl::DeadlineExceededError("hetpoold did not start serving:\n" + DaemonLog());
    }
    if (daemon_->Wait(absl::Milliseconds(50))) {
      return absl::InternalError("hetpoold exited at start:\n" + DaemonLog());
    }
  }
  return absl::DeadlineExceededError("hetpoold did not start:\n" + DaemonLog());
}

absl::Status TestCluster::StartAgent(size_t i) {
  const AgentSpec& spec = options_.agents[i];
  std::vector<std::string> argv = {HETPOOL_AGENT_BIN,
                                   "--server",
                                   address(),
                                   "--node-name",
                                   spec.name,
                                   "--work-dir",
                                   dir() + "/agent-" + spec.name,
                                   "--inventory-refresh",
                                   "500ms",
                                   "--kill-grace",
                                   "5s"};
  if (!spec.inventory_file.empty()) {
    argv.insert(argv.end(), {"--backend", "sim", "--inventory", InventoryPath(i)});
  } else {
    for (const auto& b : spec.backends) argv.insert(argv.end(), {"--backend", b});
  }
  for (const auto& l : spec.labels) argv.insert(argv.end(), {"--label", l});
  if (options_.tls) {
    argv.insert(argv.end(), {"--tls-ca", PkiDir() + "/ca.pem", "--tls-cert", PkiDir() + "/" + spec.name + ".pem",
                             "--tls-key", PkiDir() + "/" + spec.name + ".key"});
    const std::vector<std::string> sandbox = TestSandboxFlags(spec.job_dirs);
    argv.insert(argv.end(), sandbox.begin(), sandbox.end());
  } else {
    const std::vector<std::string> plain = PlainAgentFlags(spec.job_dirs);
    argv.insert(argv.end(), plain.begin(), plain.end());
  }
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  auto agent = ChildProcess::Spawn(argv, dir() + "/agent-" + spec.name + ".log", spec.env);
  if (!agent.ok()) return agent.status();
  agents_[i] = *std::move(agent);
  return absl::OkStatus();
}

void TestCluster::StopAgent(size_t i) { agents_[i].reset(); }

void TestCluster::SignalAgent(size_t i, int sig) { agents_[i]->Signal(sig); }

std::optional<int> TestCluster::WaitAgent(size_t i, absl::Duration timeout) { return agents_[i]->Wait(timeout); }

absl::Status TestCluster::Start() {
  if (auto s = StartDaemon(); !s.ok()) return s;
  for (size_t i = 0; i < options_.agents.size(); ++i) {
    if (auto s = StartAgent(i); !s.ok()) return s;
  }
  return WaitNodesReady(options_.agents.size(), absl::Seconds(30));
}

pid_t TestCluster::daemon_pid() const { return daemon_ ? daemon_->pid() : 0; }

pid_t TestCluster::agent_pid(size_t index) const {
  return index < agents_.size() && agents_[index] ? agents_[index]->pid() : 0;
}

void TestCluster::KillDaemon(int sig) {
  daemon_->Signal(sig);
  daemon_->Wait(absl::Seconds(30));
  daemon_.reset();
}

absl::Status TestCluster::WaitNodesReady(size_t count, absl::Duration timeout) {
  for (absl::Time deadline = absl::Now() + timeout; absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(100))) {
    pb::ListNodesResponse resp;
    if (!cluster_->ListNodes(Ctx().get(), {}, &resp).ok()) continue;
    size_t ready = 0;
    for (const auto& n : resp.nodes()) ready += n.state() == pb::NODE_STATE_READY;
    if (ready >= count) return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat(count, " nodes not ready in time"));
}

pb::JobSpec TestCluster::TrainSpec(int nnodes, int devices, std::vector<std::string> args) const {
  pb::JobSpec spec;
  spec.set_name("train");
  spec.set_user("tester");
  spec.mutable_python()->set_script("deploy/examples/train_ddp.py");
  for (auto& a : args) spec.mutable_python()->add_args(std::move(a));
  spec.set_working_dir(HETPOOL_SOURCE_DIR);
  spec.set_nnodes(nnodes);
  spec.set_devices_per_node(devices);
  (*spec.mutable_env())["HPTEST_RUN_MARK"] = dir();
  return spec;
}

pb::JobSpec TestCluster::ShellSpec(const std::string& script) const {
  pb::JobSpec spec = TrainSpec(1, 1, {});
  spec.clear_python();
  for (const char* arg : {"/bin/sh", "-c"}) spec.add_command(arg);
  spec.add_command(script);
  return spec;
}

absl::StatusOr<pb::Job> TestCluster::Submit(const pb::JobSpec& spec) {
  pb::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  pb::SubmitJobResponse resp;
  auto status = jobs_->SubmitJob(Ctx().get(), req, &resp);
  if (!status.ok()) return FromGrpcStatus(status);
  return resp.job();
}

absl::StatusOr<pb::Job> TestCluster::Get(const std::string& id) {
  pb::GetJobRequest req;
  req.set_job_id(id);
  pb::Job job;
  auto status = jobs_->GetJob(Ctx().get(), req, &job);
  if (!status.ok()) return FromGrpcStatus(status);
  return job;
}

absl::StatusOr<pb::Job> TestCluster::WaitFor(const std::string& id, const std::function<bool(const pb::Job&)>& done,
                                             absl::Duration timeout) {
  pb::Job last;
  for (absl::Time deadline = absl::Now() + timeout; absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(100))) {
    auto job = Get(id);
    if (!job.ok()) continue;  // e.g. the daemon is restarting
    last = *job;
    if (done(last)) return last;
  }
  return absl::DeadlineExceededError(absl::StrCat("job ", id, " still ", last.state(), " (", last.reason(), ": ",
                                                  last.message(), ")\n--- daemon log\n", DaemonLog()));
}

absl::StatusOr<pb::Job> TestCluster::WaitForState(const std::string& id, pb::JobState state, absl::Duration timeout) {
  return WaitFor(
      id, [state](const pb::Job& j) { return j.state() == state; }, timeout);
}

absl::StatusOr<std::string> TestCluster::Logs(const std::string& id, std::optional<int> rank) {
  pb::GetJobLogsRequest req;
  req.set_job_id(id);
  if (rank) {
    req.set_rank(*rank);
  }
  auto ctx = Ctx();
  auto reader = jobs_->GetJobLogs(ctx.get(), req);
  std::string out;
  pb::LogChunk chunk;
  while (reader->Read(&chunk)) out += chunk.data();
  auto status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return out;
}

std::vector<pid_t> TestCluster::JobProcesses(const std::string& job_id) const {
  std::vector<pid_t> pids;
  for (const MarkedProcess& p : MarkedProcesses("HPTEST_RUN_MARK=" + dir())) {
    auto job = p.env.find("HETPOOL_JOB_ID");
    if (job != p.env.end() && job->second == job_id) pids.push_back(p.pid);
  }
  return pids;
}

std::vector<pid_t> TestCluster::WaitForJobProcesses(const std::string& job_id, size_t count,
                                                    absl::Duration timeout) const {
  std::vector<pid_t> pids = JobProcesses(job_id);
  for (absl::Time deadline = absl::Now() + timeout; pids.size() < count && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(200));
    pids = JobProcesses(job_id);
  }
  return pids;
}

TestCluster* ExamplePoolSuite::cluster_ = nullptr;

void ExamplePoolSuite::SetUpTestSuite() {
  cluster_ = new TestCluster(TestCluster::ExamplePool());
  ASSERT_TRUE(cluster_->Start().ok());
}

void ExamplePoolSuite::TearDownTestSuite() {
  delete cluster_;
  cluster_ = nullptr;
}

std::string TestCluster::DaemonLog() const { return ReadFile(dir() + "/daemon.log"); }

std::string TestCluster::AgentLog(size_t index) const {
  return ReadFile(dir() + "/agent-" + options_.agents[index].name + ".log");
}

int TestCluster::RunCli(const std::vector<std::string>& args, std::string* output) const {
  std::vector<std::string> argv = {HETPOOLCTL_BIN, "--server", address()};
  std::vector<std::pair<std::string, std::string>> env;
  if (options_.tls) {
    // The token in the environment, as users are told to pass it (--token shows in ps).
    argv.insert(argv.end(), {"--tls-ca", PkiDir() + "/ca.pem"});
    env.emplace_back("HETPOOL_TOKEN", admin_token_);
  } else {
    argv.push_back("--insecure");
  }
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out_path = dir() + "/cli.out";
  std::filesystem::remove(out_path);
  auto child = ChildProcess::Spawn(argv, out_path, env);
  if (!child.ok()) return -1;
  auto status = (*child)->Wait(absl::Seconds(120));
  *output = ReadFile(out_path);
  if (!status) return -1;
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

}  // namespace hetpool::testing
