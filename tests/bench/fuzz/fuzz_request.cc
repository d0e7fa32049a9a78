// What arrives on the wire: a serialized SubmitJobRequest, RegisterRequest or PlanRequest (the
// first byte picks which), parsed the way gRPC parses it for hetpoold (proto/request_parsing.h:
// the path of a field that is not UTF-8 is named) and through the checks it makes before acting.
#include <cstddef>
#include <cstdint>

#include "grpcpp/support/byte_buffer.h"
#include "google/protobuf/stubs/logging.h"
#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/job.pb.h"
#include "request_parsing.h"
#include "src/common/convert.h"
#include "src/common/plan_convert.h"
#include "src/daemon/state/job_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // protobuf logs every string that is not UTF-8; at a million inputs a minute that is noise.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  grpc::Slice slice(data + 1, size - 1);
  // As gRPC does before a handler runs; false when the bytes are refused (with a reason).
  auto parse = [&slice](google::protobuf::Message* message) {
    grpc::ByteBuffer buffer(&slice, 1);
    return hetpool::rpc::ParseRequest(&buffer, message).ok();
  };
  switch (data[0] % 3) {
    case 0: {
      hetpool::v1::SubmitJobRequest req;
      if (parse(&req)) (void)hetpool::daemon::ValidateAndNormalizeSpec(*req.mutable_spec());
      break;
    }
    case 1: {
      hetpool::v1::RegisterRequest req;
      if (parse(&req)) {
        (void)hetpool::daemon::ValidateNodeName(req.node_name());
        (void)hetpool::FromProto(req.inventory());
      }
      break;
    }
    default: {
      hetpool::v1::PlanRequest req;
      if (parse(&req)) (void)hetpool::FromProto(req);
    }
  }
  return 0;
}
