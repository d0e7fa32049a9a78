// hetpool's streamed request types parse through ParseRequest too (request_parsing.h says why;
// unary ones already do, as gRPC parses those as MessageLite). Every generated *.grpc.pb.h of the
// hetpool API includes this header first (proto/CMakeLists.txt).
#pragma once

#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/job.pb.h"
#include "request_parsing.h"

namespace grpc {
HETPOOL_PARSE_NAMING_FIELD(::hetpool::v1::StreamOrdersRequest)
HETPOOL_PARSE_NAMING_FIELD(::hetpool::v1::WatchJobRequest)
HETPOOL_PARSE_NAMING_FIELD(::hetpool::v1::GetJobLogsRequest)
}  // namespace grpc
