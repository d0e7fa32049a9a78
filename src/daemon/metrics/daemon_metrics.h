// hetpoold's metrics (--metrics-listen; names in docs/operations.md): counters and histograms fed
// by the state as things happen (StateObserver) and by every API call (CallObserver), and gauges
// computed from a PoolSnapshot on each scrape: cards by node, vendor and class (allocated, free,
// unhealthy, unschedulable, fractional use), device memory and utilisation, the queue by state
// and priority, agent lease lag.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "src/common/metrics_endpoint.h"
#include "src/daemon/services/call_observer.h"
#include "src/daemon/state/cluster_state.h"
#include "src/daemon/state/state_observer.h"

namespace hetpool::daemon {

class DaemonMetrics final : public StateObserver, public CallObserver {
 public:
  // Serves on `listen`. The snapshot gauges appear once Watch() names the state.
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Start(const std::string& listen);
  void Watch(const ClusterState* state);
  int port() const { return endpoint_->port(); }

  void Decision(const hetpool::v1::Job& job, absl::Duration took, bool placed) override;
  void StoreWrite(absl::Duration took, bool ok) override;
  void SchedulingPass(absl::Duration took, bool full) override;
  void JobEnded(const hetpool::v1::Job& job) override;
  void JobRestarted(const hetpool::v1::Job& job, const std::string& reason) override;
  void Call(absl::string_view method, absl::StatusCode code, absl::Duration took) override;

 private:
  class PoolCollector;
  DaemonMetrics();

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& decision_seconds_;
  prometheus::Family<prometheus::Histogram>& pass_seconds_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Histogram>& store_write_seconds_;
  prometheus::Family<prometheus::Counter>& store_write_failures_;
  prometheus::Family<prometheus::Histogram>& job_duration_seconds_;
  prometheus::Family<prometheus::Counter>& jobs_finished_;
  prometheus::Family<prometheus::Counter>& job_restarts_;
  prometheus::Family<prometheus::Histogram>& call_seconds_;
  std::shared_ptr<PoolCollector> pool_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
};

}  // namespace hetpool::daemon
