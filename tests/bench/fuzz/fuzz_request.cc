// What arrives on the wire: a serialized SubmitJobRequest, RegisterRequest or PlanRequest (the
// first byte picks which), through the checks hetpoold makes before it acts on one.
#include <cstddef>
#include <cstdint>

#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/job.pb.h"
#include "src/common/convert.h"
#include "src/common/plan_convert.h"
#include "src/daemon/state/job_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* body = data + 1;
  const int length = static_cast<int>(size - 1);
  switch (data[0] % 3) {
    case 0: {
      hetpool::v1::SubmitJobRequest req;
      if (req.ParseFromArray(body, length)) (void)hetpool::daemon::ValidateAndNormalizeSpec(*req.mutable_spec());
      break;
    }
    case 1: {
      hetpool::v1::RegisterRequest req;
      if (req.ParseFromArray(body, length)) {
        (void)hetpool::daemon::ValidateNodeName(req.node_name());
        (void)hetpool::FromProto(req.inventory());
      }
      break;
    }
    default: {
      hetpool::v1::PlanRequest req;
      if (req.ParseFromArray(body, length)) (void)hetpool::FromProto(req);
    }
  }
  return 0;
}
