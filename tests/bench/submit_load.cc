// submit_load: durable submissions per second. Starts hetpoold on SQLite (or on a 3-member etcd
// cluster) and drives SubmitJob from many concurrent clients for a fixed time; every reply counted
// is an acknowledged, durable submission. Reports submissions/s and p50/p99 latency.
// The daemon runs through the test harness (tests/testing), stopped when the program ends.
//   submit_load [--store sqlite|etcd] [--clients 32] [--seconds 10] [-o json]
#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/bench/percentile.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/temp_dir.h"

namespace {

using namespace hetpool::testing;

using hetpool::bench::Percentile;

}  // namespace

int main(int argc, char** argv) {
  std::string store = "sqlite", output = "table";
  int clients = 32, seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--store")
      store = value;
    else if (flag == "--clients")
      clients = std::stoi(value);
    else if (flag == "--seconds")
      seconds = std::stoi(value);
    else if (flag == "-o")
      output = value;
    else {
      std::cerr << "usage: submit_load [--store sqlite|etcd] [--clients 32] [--seconds 10] [-o json]\n";
      return 2;
    }
  }
  TempDir etcd_dir;
  std::unique_ptr<EtcdCluster> etcd;
  TestCluster::Options options;                                         // no agents: every job stays pending
  options.daemon_args = {"--log-level", "warn", "--submit-rate", "0"};  // measure the store, not the limiter
  if (store == "etcd") {
    etcd = std::make_unique<EtcdCluster>(etcd_dir.path(), 3);
    if (auto s = etcd->Start(); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
    options.daemon_args.insert(options.daemon_args.end(), {"--store", "etcd://" + etcd->endpoints()});
  }
  TestCluster cluster(options);
  if (auto s = cluster.StartDaemon(); !s.ok()) {  // returns once it serves (on etcd: elected)
    std::cerr << s << "\n";
    return 1;
  }
  const std::string address = cluster.address();

  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::mutex mu;
  std::vector<double> latency_ms;
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      // One channel per client, as separate CI pipelines or users would have.
      grpc::ChannelArguments args;
      args.SetInt("hetpool.client", c);  // distinct arguments: a channel (connection) of its own
      auto stub = hetpool::v1::JobService::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
      hetpool::v1::SubmitJobRequest req;
      auto& spec = *req.mutable_spec();
      spec.set_name("load");
      spec.set_user(absl::StrCat("client-", c));
      spec.add_command("/bin/true");
      spec.set_working_dir("/tmp");
      spec.set_nnodes(1);
      spec.set_devices_per_node(0);
      spec.set_procs_per_node(1);
      std::vector<double> mine;
      for (int n = 0; !stop.load(); ++n) {
        req.set_request_id(absl::StrCat("c", c, "-", n));
        hetpool::v1::SubmitJobResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
        const auto a = std::chrono::steady_clock::now();
        const grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
        const auto b = std::chrono::steady_clock::now();
        if (!s.ok()) {
          ++errors;
          continue;
        }
        mine.push_back(std::chrono::duration<double, std::milli>(b - a).count());
      }
      std::lock_guard<std::mutex> lock(mu);
      latency_ms.insert(latency_ms.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json out = {{"store", store},
                        {"clients", clients},
                        {"seconds", elapsed},
                        {"acknowledged", latency_ms.size()},
                        {"errors", errors.load()},
                        {"submissions_per_second", static_cast<double>(latency_ms.size()) / elapsed},
                        {"p50_ms", Percentile(latency_ms, 0.5)},
                        {"p99_ms", Percentile(latency_ms, 0.99)}};
  std::cout << (output == "json" ? out.dump(2) : out.dump()) << "\n";
  return 0;
}
