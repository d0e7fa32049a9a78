#include "src/agent/agent_metrics.h"

#include <map>

namespace hetpool::agent {
namespace {

class TelemetryCollector final : public prometheus::Collectable {
 public:
  TelemetryCollector(std::string node, std::function<NodeTelemetry()> telemetry)
      : node_(std::move(node)), telemetry_(std::move(telemetry)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const NodeTelemetry t = telemetry_();
    GaugeFamily memory("hetpool_agent_device_memory_bytes", "Device memory");
    GaugeFamily used("hetpool_agent_device_memory_used_bytes", "Device memory in use");
    GaugeFamily utilization("hetpool_agent_device_utilization_ratio", "Device utilisation (0-1)");
    GaugeFamily healthy("hetpool_agent_device_healthy", "1 when the vendor library reports the device healthy");
    for (const auto& d : t.inventory.devices()) {
      const std::map<std::string, std::string> labels = {
          {"node", node_}, {"device", d.id()}, {"vendor", d.vendor()}, {"model", d.model()}};
      memory.Add(labels, static_cast<double>(d.memory_mib()) * 1048576.0);
      used.Add(labels, static_cast<double>(d.memory_used_mib()) * 1048576.0);
      if (d.utilization_percent() >= 0) utilization.Add(labels, d.utilization_percent() / 100.0);
      healthy.Add(labels, d.healthy() ? 1 : 0);
    }
    GaugeFamily processes("hetpool_agent_job_processes", "Job process groups running on this node");
    processes.Add({{"node", node_}}, t.job_processes);
    GaugeFamily registered("hetpool_agent_registered", "1 while the agent holds a session with hetpoold");
    registered.Add({{"node", node_}}, t.registered ? 1 : 0);
    return {memory.Take(), used.Take(), utilization.Take(), healthy.Take(), processes.Take(), registered.Take()};
  }

 private:
  std::string node_;
  std::function<NodeTelemetry()> telemetry_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartAgentMetrics(const std::string& listen,
                                                                   const std::string& node_name,
                                                                   std::function<NodeTelemetry()> telemetry) {
  auto endpoint = MetricsEndpoint::Start(listen);
  if (!endpoint.ok()) return endpoint.status();
  (*endpoint)->Register(std::make_shared<TelemetryCollector>(node_name, std::move(telemetry)));
  return endpoint;
}

}  // namespace hetpool::agent
