// Untrusted input on the log path and from agents (issue 14): a GetJobLogsRequest through the
// checks that pick log streams and through the log store (reads, by the names it allows, in a
// scratch directory), node output through the log filter, and an agent's HeartbeatRequest or
// PushLogsRequest applied to a live cluster state (one registered node, one scheduled job).
// The first byte picks which.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/job.pb.h"
#include "scheduler/framework/profile.h"
#include "src/daemon/logs/log_filter.h"
#include "src/daemon/logs/log_request.h"
#include "src/daemon/logs/log_store.h"
#include "src/daemon/state/cluster_state.h"
#include "src/daemon/store/sqlite_store.h"

namespace {

namespace pb = ::hetpool::v1;
using namespace hetpool::daemon;  // NOLINT: a fuzz target's whole world

struct World {
  std::string dir;
  std::unique_ptr<LogStore> logs;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<hetpool::scheduler::Framework> policy = hetpool::scheduler::DefaultFramework();
  std::unique_ptr<ClusterState> state;
  std::string session;
  pb::Job job;
};

World& TheWorld() {
  static World* world = [] {
    auto* w = new World;
    char tmpl[] = "/tmp/hetpool-fuzz-XXXXXX";
    w->dir = mkdtemp(tmpl);
    w->logs = *LogStore::Open(w->dir + "/logs", LogStoreOptions{.max_stream_bytes = 1 << 16});
    w->store = *SqliteStore::Open(w->dir + "/hetpool.db");
    w->state = std::make_unique<ClusterState>(ClusterOptions{}, w->store.get(), w->policy.get());
    (void)w->state->Load();
    pb::RegisterRequest reg;
    reg.set_node_name("node-a");
    reg.set_address("127.0.0.1");
    reg.set_torchrun_path("/usr/bin/torchrun");
    reg.set_work_dir("/tmp/node-a");
    w->session = w->state->Register(reg)->session_id();
    pb::JobSpec spec;
    spec.set_user("fuzz");
    spec.add_command("/bin/true");
    spec.set_working_dir("/tmp");
    spec.set_nnodes(1);
    spec.set_procs_per_node(2);  // a CPU job: node-a has no devices
    w->job = *w->state->Submit(spec, "");
    w->state->Tick();
    w->job = *w->state->GetJob(w->job.id());
    (void)w->logs->Append(w->job.id(), 1, "node-a", 0, "[default0]:zero\n[default1]:one\n");
    return w;
  }();
  return *world;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = TheWorld();
  // protobuf logs every string that is not UTF-8; at a million inputs a minute that is noise.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: {
      pb::GetJobLogsRequest req;
      if (!req.ParseFromString(body)) break;
      auto streams = LogStreamsFor(w.job, req, req.generation() ? req.generation() : w.job.generation());
      if (!streams.ok()) break;
      for (const auto& stream : *streams) {
        auto slice = w.logs->Read(w.job.id(), req.generation(), stream.node, 0, 4096);
        if (slice.ok()) LogFilter(stream.local_rank, 64).Feed(slice->data);
      }
      break;
    }
    case 1: LogFilter(data[0] % 2 ? std::optional<int>(1) : std::nullopt, 32).Feed(body); break;
    case 2: {
      pb::HeartbeatRequest req;
      if (!req.ParseFromString(body)) break;
      req.set_node_name("node-a");
      req.set_session_id(w.session);
      (void)w.state->Heartbeat(req);
      break;
    }
    default: {
      pb::PushLogsRequest req;
      if (!req.ParseFromString(body)) break;
      if (w.state->CheckLogPush("node-a", w.session, req.job_id(), req.generation()).ok()) {
        (void)w.logs->Append(req.job_id(), req.generation(), "node-a", req.offset() % (1 << 20), req.data());
      }
    }
  }
  return 0;
}
