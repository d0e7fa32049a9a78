// The job-file format (`hetpoolctl submit -f`): protobuf's JSON mapping of JobSpec, then the
// daemon's validation of what was parsed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "hetpool/v1/job.pb.h"
#include "src/daemon/state/job_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  hetpool::v1::JobSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (!google::protobuf::util::JsonStringToMessage(text, &spec, options).ok()) return 0;
  (void)hetpool::daemon::ValidateAndNormalizeSpec(spec);
  return 0;
}
