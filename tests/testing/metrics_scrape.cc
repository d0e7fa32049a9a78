#include "tests/testing/metrics_scrape.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

namespace hetpool::testing {

// GET /metrics on 127.0.0.1:port; the body, or "" when nothing answers.
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The value of the first sample line starting with `series` (name and labels), or -1.
double Sample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      const size_t space = text.find(' ', at + series.size());
      return std::stod(text.substr(space + 1, text.find('\n', space) - space - 1));
    }
    at += series.size();
  }
  return -1;
}

double HistogramQuantile(const std::string& text, const std::string& name, const std::string& labels, double q) {
  // Cumulative counts by upper bound, in the order the exposition lists them (ascending le).
  std::vector<std::pair<double, double>> buckets;
  const std::string prefix = name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"";
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    if (at != 0 && text[at - 1] != '\n') continue;
    const size_t le_start = at + prefix.size();
    const size_t le_end = text.find('"', le_start);
    const std::string le = text.substr(le_start, le_end - le_start);
    const size_t space = text.find(' ', le_end);
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::strtod(le.c_str(), nullptr);
    buckets.emplace_back(bound, std::strtod(text.c_str() + space + 1, nullptr));
  }
  if (buckets.empty() || buckets.back().second <= 0) return -1;
  const double rank = q * buckets.back().second;
  double lower = 0, below = 0;
  for (const auto& [bound, count] : buckets) {
    if (count >= rank) {
      // The +Inf bucket has no upper edge: report its lower one, as Prometheus does.
      if (bound == std::numeric_limits<double>::infinity()) return lower;
      const double in_bucket = count - below;
      return in_bucket <= 0 ? bound : lower + (bound - lower) * (rank - below) / in_bucket;
    }
    lower = bound, below = count;
  }
  return lower;
}

}  // namespace hetpool::testing
