// hetpool-agent's metrics (--metrics-listen): node-local device telemetry from the vendors'
// libraries as last discovered (memory, utilisation, health) and the node's job processes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/agent/session.h"
#include "src/common/metrics_endpoint.h"

namespace hetpool::agent {

// Serves on `listen`; `telemetry` is called on every scrape.
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartAgentMetrics(const std::string& listen,
                                                                   const std::string& node_name,
                                                                   std::function<NodeTelemetry()> telemetry);

}  // namespace hetpool::agent
