// Reading a Prometheus endpoint the way Prometheus does: for the metrics integration test and
// the fleet-scale bench.
#pragma once

#include <string>

namespace hetpool::testing {

// GET /metrics on 127.0.0.1:port; the body, or "" when nothing answers.
std::string Scrape(int port);

// The value of the first sample line starting with `series` (name and labels), or -1.
double Sample(const std::string& text, const std::string& series);

// The q-quantile (0..1) of histogram `name` with `labels` (`kind="full"`, or empty) by linear
// interpolation inside the bucket that holds it, as PromQL's histogram_quantile does; -1 when it
// has no observations.
double HistogramQuantile(const std::string& text, const std::string& name, const std::string& labels, double q);

}  // namespace hetpool::testing
