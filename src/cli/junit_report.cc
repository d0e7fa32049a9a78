#include "src/cli/junit_report.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/common/convert.h"

namespace hetpool::cli {
namespace {

namespace pb = ::hetpool::v1;

// Text for an attribute or element: XML's five specials escaped, other control bytes dropped
// (XML 1.0 cannot carry them at all).
std::string Xml(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n':
      case '\t': out += c; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20) out += c;
    }
  }
  return out;
}

double Seconds(const pb::Job& job) {
  if (!job.has_created_at()) return 0;
  const absl::Time start = FromProtoTime(job.has_started_at() ? job.started_at() : job.created_at());
  const absl::Time end = job.has_finished_at() ? FromProtoTime(job.finished_at()) : absl::Now();
  return std::max(0.0, absl::ToDoubleSeconds(end - start));
}

}  // namespace

std::string JunitReport(const pb::Job& job, bool timed_out) {
  const double seconds = Seconds(job);
  std::string outcome;  // the test case's child element
  int failures = 0, errors = 0, skipped = 0;
  const std::string message = absl::StrCat(job.reason(), job.message().empty() ? "" : ": ", job.message());
  if (timed_out) {
    ++errors;
    outcome = absl::StrCat("      <error type=\"Timeout\" message=\"",
                           Xml(absl::StrCat("still ", JobStateName(job.state()), " when wait gave up")), "\"/>\n");
  } else if (job.state() == pb::JOB_STATE_CANCELLED) {
    ++skipped;
    outcome = absl::StrCat("      <skipped message=\"", Xml(message), "\"/>\n");
  } else if (job.state() == pb::JOB_STATE_FAILED) {
    const bool infrastructure = job.failure_origin() == pb::FAILURE_ORIGIN_INFRASTRUCTURE;
    (infrastructure ? errors : failures)++;
    const std::string lines = absl::StrJoin(job.failure().last_lines(), "\n");
    outcome =
        absl::StrCat("      <", infrastructure ? "error" : "failure", " type=\"", Xml(job.reason()), "\" message=\"",
                     Xml(message), "\">", Xml(lines), "</", infrastructure ? "error" : "failure", ">\n");
  }
  const std::string name = job.spec().name().empty() ? job.id() : absl::StrCat(job.id(), " ", job.spec().name());
  return absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      absl::StrFormat("<testsuites tests=\"1\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n", failures,
                      errors, skipped, seconds),
      absl::StrFormat(
          "  <testsuite name=\"hetpool\" tests=\"1\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
          failures, errors, skipped, seconds),
      "    <testcase classname=\"hetpool.", Xml(job.spec().user().empty() ? "job" : job.spec().user()), "\" name=\"",
      Xml(name), "\"", absl::StrFormat(" time=\"%.3f\"", seconds), outcome.empty() ? "/>\n" : ">\n", outcome,
      outcome.empty() ? "" : "    </testcase>\n", "  </testsuite>\n</testsuites>\n");
}

absl::Status WriteJunitReport(const std::string& path, const pb::Job& job, bool timed_out) {
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << JunitReport(job, timed_out);
    if (!out.flush()) return absl::UnavailableError(absl::StrCat(path, ": cannot write the JUnit report"));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot write the JUnit report"));
  }
  return absl::OkStatus();
}

}  // namespace hetpool::cli
