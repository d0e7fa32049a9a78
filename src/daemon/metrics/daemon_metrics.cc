#include "src/daemon/metrics/daemon_metrics.h"

#include <cctype>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/convert.h"

namespace hetpool::daemon {
namespace {

// Scheduling decisions and store writes take microseconds to tens of milliseconds.
const prometheus::Histogram::BucketBoundaries kFastSeconds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                              0.01,   0.025,   0.05,   0.1,   0.25,   1};
// A pass over the queue: a millisecond for a handful of jobs, seconds for a quarter million.
const prometheus::Histogram::BucketBoundaries kPassSeconds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                              0.1,    0.25,  0.5,    1,     2.5,  5};
// An API call: tens of microseconds for a heartbeat, seconds for a stream or a long usage window.
const prometheus::Histogram::BucketBoundaries kCallSeconds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
// Jobs run from seconds to weeks.
const prometheus::Histogram::BucketBoundaries kJobSeconds = {10,       60,        300,   900,       3600,
                                                             4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400};

std::string StateLabel(int state) {
  std::string name(JobStateName(static_cast<hetpool::v1::JobState>(state)));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

class DaemonMetrics::PoolCollector final : public prometheus::Collectable {
 public:
  // Null stops the gauges; returns once no scrape uses the previous state.
  void Watch(const ClusterState* state) {
    absl::MutexLock lock(&mu_);
    state_ = state;
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    PoolSnapshot snap;
    {
      absl::MutexLock lock(&mu_);
      if (state_ == nullptr) return {};
      snap = state_->Snapshot();
    }
    GaugeFamily cards("hetpool_cards", "Cards by node, vendor and fingerprint class, and what they are doing");
    GaugeFamily share("hetpool_cards_allocated_share",
                      "Cards held by jobs, fractional shares counted by their fraction");
    GaugeFamily memory_total("hetpool_device_memory_bytes", "Device memory");
    GaugeFamily memory_used("hetpool_device_memory_used_bytes", "Device memory in use, as the agent reported");
    GaugeFamily utilization("hetpool_device_utilization_ratio", "Device utilisation, as the agent reported (0-1)");
    using Key = std::tuple<std::string, std::string, std::string, std::string>;  // node vendor model class
    struct Cards {
      std::map<std::string, int> by_status;
      double share = 0;  // held, fractional shares by their fraction
    };
    std::map<Key, Cards> by_class;
    for (const DeviceSample& d : snap.devices) {
      const std::string& node = snap.nodes[d.node].name;
      const CardKind& kind = snap.kinds[d.kind];
      const Key key{node, kind.vendor, kind.model, kind.fingerprint};
      const char* status = !d.healthy                  ? "unhealthy"
                           : d.dirty                   ? "dirty"
                           : !d.schedulable            ? "unschedulable"
                           : d.allocated_milli >= 1000 ? "allocated"
                           : d.allocated_milli > 0     ? "shared"
                                                       : "free";
      Cards& c = by_class[key];
      ++c.by_status[status];
      c.share += d.allocated_milli / 1000.0;
      const std::map<std::string, std::string> device = {{"node", node}, {"device", d.device}, {"vendor", kind.vendor}};
      memory_total.Add(device, static_cast<double>(d.memory_mib) * 1048576.0);
      memory_used.Add(device, static_cast<double>(d.memory_used_mib) * 1048576.0);
      if (d.utilization_percent >= 0) utilization.Add(device, d.utilization_percent / 100.0);
    }
    for (const auto& [key, c] : by_class) {
      const auto& [node, vendor, model, fingerprint] = key;
      const std::map<std::string, std::string> labels = {
          {"node", node}, {"vendor", vendor}, {"model", model}, {"fingerprint", fingerprint}};
      for (const char* status : {"allocated", "shared", "free", "unhealthy", "dirty", "unschedulable"}) {
        auto it = c.by_status.find(status);
        std::map<std::string, std::string> with_status = labels;
        with_status["status"] = status;
        cards.Add(std::move(with_status), it == c.by_status.end() ? 0 : it->second);
      }
      share.Add(labels, c.share);
    }
    GaugeFamily jobs("hetpool_jobs", "Jobs by state and priority");
    for (const auto& [key, n] : snap.jobs) {
      jobs.Add({{"state", StateLabel(key.first)}, {"priority", absl::StrCat(key.second)}}, static_cast<double>(n));
    }
    GaugeFamily ready("hetpool_node_ready", "1 when the node's agent holds a live lease");
    GaugeFamily drained("hetpool_node_drained", "1 when the node takes no new work");
    GaugeFamily lag("hetpool_agent_lease_lag_seconds", "Seconds since the node's agent last reported");
    for (const NodeSample& n : snap.nodes) {
      ready.Add({{"node", n.name}}, n.ready ? 1 : 0);
      drained.Add({{"node", n.name}}, n.drained ? 1 : 0);
      lag.Add({{"node", n.name}}, n.seconds_since_heartbeat);
    }
    GaugeFamily quarantined("hetpool_card_quarantined_since_seconds",
                            "Quarantined cards: when each was taken out of service (Unix seconds), and why");
    for (const QuarantineSample& q : snap.quarantined) {
      quarantined.Add({{"node", q.node}, {"device", q.device}, {"reason", q.reason}}, q.since_unix_seconds);
    }
    std::vector<prometheus::MetricFamily> out;
    for (GaugeFamily* f :
         {&cards, &share, &memory_total, &memory_used, &utilization, &jobs, &ready, &drained, &lag, &quarantined}) {
      out.push_back(f->Take());
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  const ClusterState* state_ ABSL_GUARDED_BY(mu_) = nullptr;
};

DaemonMetrics::DaemonMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      decision_seconds_(prometheus::BuildHistogram()
                            .Name("hetpool_scheduling_decision_seconds")
                            .Help("Time to decide one job's placement (placed or not)")
                            .Register(*registry_)),
      pass_seconds_(prometheus::BuildHistogram()
                        .Name("hetpool_scheduling_pass_seconds")
                        .Help("One scheduling pass: over the whole queue (kind=full) or new submissions (kind=new)")
                        .Register(*registry_)),
      decisions_(prometheus::BuildCounter()
                     .Name("hetpool_scheduling_decisions_total")
                     .Help("Scheduling decisions by result (placed, waiting); rate() is decisions per second")
                     .Register(*registry_)),
      store_write_seconds_(prometheus::BuildHistogram()
                               .Name("hetpool_store_write_seconds")
                               .Help("Durable job writes (SQLite commit or etcd put)")
                               .Register(*registry_)),
      store_write_failures_(prometheus::BuildCounter()
                                .Name("hetpool_store_write_failures_total")
                                .Help("Job writes the store refused")
                                .Register(*registry_)),
      job_duration_seconds_(prometheus::BuildHistogram()
                                .Name("hetpool_job_duration_seconds")
                                .Help("From first start to the end, by final state")
                                .Register(*registry_)),
      jobs_finished_(prometheus::BuildCounter()
                         .Name("hetpool_jobs_finished_total")
                         .Help("Jobs that ended, by final state and reason")
                         .Register(*registry_)),
      job_restarts_(prometheus::BuildCounter()
                        .Name("hetpool_job_restarts_total")
                        .Help("Gangs stopped and queued again, by reason")
                        .Register(*registry_)),
      call_seconds_(prometheus::BuildHistogram()
                        .Name("hetpool_api_call_seconds")
                        .Help("API calls by method and status code: from the handler's start to its answer "
                              "(for a stream, its whole life)")
                        .Register(*registry_)),
      pool_(std::make_shared<PoolCollector>()) {}

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Start(const std::string& listen) {
  std::unique_ptr<DaemonMetrics> m(new DaemonMetrics());
  auto endpoint = MetricsEndpoint::Start(listen);
  if (!endpoint.ok()) return endpoint.status();
  m->endpoint_ = *std::move(endpoint);
  // Known label values start at zero, so rate() and alerts see a series before the first event.
  for (const char* reason : kRestartReasons) m->job_restarts_.Add({{"reason", reason}});
  for (const char* result : {"placed", "waiting"}) m->decisions_.Add({{"result", result}});
  m->store_write_failures_.Add({});
  m->endpoint_->Register(m->registry_);
  m->endpoint_->Register(m->pool_);
  return m;
}

void DaemonMetrics::Watch(const ClusterState* state) { pool_->Watch(state); }

void DaemonMetrics::Decision(const pb::Job&, absl::Duration took, bool placed) {
  decision_seconds_.Add({}, kFastSeconds).Observe(absl::ToDoubleSeconds(took));
  decisions_.Add({{"result", placed ? "placed" : "waiting"}}).Increment();
}

void DaemonMetrics::SchedulingPass(absl::Duration took, bool full) {
  pass_seconds_.Add({{"kind", full ? "full" : "new"}}, kPassSeconds).Observe(absl::ToDoubleSeconds(took));
}

void DaemonMetrics::Call(absl::string_view method, absl::StatusCode code, absl::Duration took) {
  call_seconds_.Add({{"method", std::string(method)}, {"code", absl::StatusCodeToString(code)}}, kCallSeconds)
      .Observe(absl::ToDoubleSeconds(took));
}

void DaemonMetrics::StoreWrite(absl::Duration took, bool ok) {
  store_write_seconds_.Add({}, kFastSeconds).Observe(absl::ToDoubleSeconds(took));
  if (!ok) store_write_failures_.Add({}).Increment();
}

void DaemonMetrics::JobEnded(const hetpool::v1::Job& job) {
  const std::string state = StateLabel(job.state());
  jobs_finished_.Add({{"state", state}, {"reason", job.reason()}}).Increment();
  if (job.has_started_at() && job.has_finished_at()) {
    const double seconds = absl::ToDoubleSeconds(FromProtoTime(job.finished_at()) - FromProtoTime(job.started_at()));
    job_duration_seconds_.Add({{"state", state}}, kJobSeconds).Observe(seconds);
  }
}

void DaemonMetrics::JobRestarted(const hetpool::v1::Job&, const std::string& reason) {
  job_restarts_.Add({{"reason", reason}}).Increment();
}

}  // namespace hetpool::daemon
