// Every configuration file an operator writes; the first byte picks the parser: token file,
// quotas, run-as map, scheduler profile, price table, card spec table.
#include <cstddef>
#include <cstdint>
#include <string>

#include "drivers/fingerprint/spec_table.h"
#include "planner/pool.h"
#include "scheduler/framework/profile.h"
#include "src/agent/job_sandbox.h"
#include "src/daemon/security/quota.h"
#include "src/common/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0: (void)hetpool::TokenTable::Parse(text); break;
    case 1: (void)hetpool::daemon::QuotaTable::Parse(text); break;
    case 2: (void)hetpool::agent::ParseRunAsMap(text); break;
    case 3: (void)hetpool::scheduler::FrameworkFromProfile(text); break;
    case 4: (void)hetpool::planner::ParsePriceTable(text); break;
    default: {
      hetpool::drivers::SpecTable specs = hetpool::drivers::SpecTable::Defaults();
      (void)specs.MergeJson(text);
    }
  }
  return 0;
}
