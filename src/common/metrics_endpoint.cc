#include "src/common/metrics_endpoint.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace hetpool {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& listen) {
  auto endpoint = std::make_unique<MetricsEndpoint>();
  try {
    // civetweb takes "host:port"; it throws when it cannot bind.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen ", listen, ": cannot serve (", e.what(), ")"));
  }
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("--metrics-listen ", listen, ": not listening"));
  endpoint->port_ = ports.front();
  return endpoint;
}

void MetricsEndpoint::Register(const std::shared_ptr<prometheus::Collectable>& collectable) {
  kept_.push_back(collectable);
  exposer_->RegisterCollectable(collectable);
}

GaugeFamily::GaugeFamily(std::string name, std::string help) {
  family_.name = std::move(name);
  family_.help = std::move(help);
  family_.type = prometheus::MetricType::Gauge;
}

void GaugeFamily::Add(std::map<std::string, std::string> labels, double value) {
  prometheus::ClientMetric metric;
  for (auto& [name, v] : labels) metric.label.push_back({name, std::move(v)});
  metric.gauge.value = value;
  family_.metric.push_back(std::move(metric));
}

}  // namespace hetpool
