// `hetpoolctl usage`: card-hours and cost per job, user, group or card class over a window
// (GetUsage), as a table, JSON or CSV.
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/command.h"
#include "src/cli/output.h"
#include "src/cli/when.h"
#include "src/common/convert.h"
#include "src/common/flags.h"

namespace hetpool::cli {
namespace {

// RFC 4180: quote fields holding separators, quotes or line breaks.
std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

struct UsageOptions {
  std::string since = "7d", until, by = "job";
};

void DeclareUsage(FlagSet& flags, UsageOptions* o) {
  flags.String("since", &o->since, "start of the window: a span back from now (7d, 12h) or a date (2026-11-01)");
  flags.String("until", &o->until, "end of the window (default: now)");
  flags.String("by", &o->by, "one row per job (default), user, group or card class");
  flags.Values("by", {"job", "user", "group", "class"});
}

int ShowUsage(Client& client, const Invocation& in, const UsageOptions& o) {
  const std::string& since = o.since;
  const std::string& until = o.until;
  const std::string& by = o.by;
  const absl::Time now = absl::Now();
  auto from = ParseWhenFlag("--since", since, now);
  if (!from.ok()) return in.Usage(std::string(from.status().message()));
  auto to = ParseWhenFlag("--until", until, now);
  if (!to.ok()) return in.Usage(std::string(to.status().message()));
  pb::UsageRequest req;
  if (*from) *req.mutable_since() = ToProtoTime(**from);
  if (*to) *req.mutable_until() = ToProtoTime(**to);
  req.set_by(by);
  pb::UsageResponse resp;
  auto status = client.jobs().GetUsage(client.Context().get(), req, &resp);
  if (!status.ok()) return client.Failed(status);
  if (client.json()) {
    std::cout << ToJson(resp);
    return 0;
  }
  if (client.csv()) {
    std::cout << "key,user,group,class,fingerprint,jobs,card_hours,cost,currency\n";
    for (const auto& r : resp.rows()) {
      std::cout << CsvField(r.key()) << ',' << CsvField(r.user()) << ',' << CsvField(r.group()) << ','
                << CsvField(r.class_label()) << ',' << CsvField(r.fingerprint()) << ',' << r.jobs() << ','
                << absl::StrFormat("%.4f", r.card_hours()) << ',' << absl::StrFormat("%.2f", r.cost()) << ','
                << resp.currency() << "\n";
    }
    return 0;
  }
  Table table({by == "job" ? "JOB" : absl::AsciiStrToUpper(by), "USER", "GROUP", "CLASS", "JOBS", "CARD-HOURS",
               absl::StrCat("COST (", resp.currency(), ")")});
  for (const auto& r : resp.rows()) {
    table.Add({r.key(), r.user().empty() ? "-" : r.user(), r.group().empty() ? "-" : r.group(),
               r.class_label().empty() ? "-" : r.class_label(), absl::StrCat(r.jobs()),
               absl::StrFormat("%.2f", r.card_hours()), r.cost() > 0 ? absl::StrFormat("%.2f", r.cost()) : "-"});
  }
  std::cout << table.Render()
            << absl::StrFormat("total: %.2f card-hours, %.2f %s, %s to %s\n", resp.total_card_hours(),
                               resp.total_cost(), resp.currency(),
                               absl::FormatTime("%Y-%m-%d %H:%M", FromProtoTime(resp.since()), absl::LocalTimeZone()),
                               absl::FormatTime("%Y-%m-%d %H:%M", FromProtoTime(resp.until()), absl::LocalTimeZone()));
  return 0;
}

}  // namespace

std::vector<CommandEntry> UsageCommands() {
  return {{.name = "usage",
           .summary = "card-hours and cost per job, user, group or card class",
           .details = "Card-hours (fractional shares by their fraction) and cost from hetpoold's price table.",
           .examples = {"hetpoolctl usage --since 30d --by group -o csv > usage.csv"},
           .csv_output = true,
           .make = Make<UsageOptions>(DeclareUsage, ShowUsage)}};
}

}  // namespace hetpool::cli
