// A Prometheus scrape endpoint (prometheus-cpp's Exposer) that reports a bind failure as a status
// instead of an exception, and gauge families built from plain samples at scrape time. Shared by
// hetpoold and hetpool-agent.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"

namespace hetpool {

class MetricsEndpoint {
 public:
  // `listen`: host:port (port 0 = any free one).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& listen);
  void Register(const std::shared_ptr<prometheus::Collectable>& collectable);
  int port() const { return port_; }

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::vector<std::shared_ptr<prometheus::Collectable>> kept_;  // the exposer holds weak pointers
  int port_ = 0;
};

// Builds one gauge family: Add({{"node", "a"}}, 3).
class GaugeFamily {
 public:
  GaugeFamily(std::string name, std::string help);
  void Add(std::map<std::string, std::string> labels, double value);
  prometheus::MetricFamily Take() { return std::move(family_); }

 private:
  prometheus::MetricFamily family_;
};

}  // namespace hetpool
