// Messages that do not parse get a status that says what is wrong, not gRPC's bare INTERNAL.
//
// gRPC parses a request before any handler runs and answers a failed parse with INTERNAL and an
// empty message, so a client that sends invalid UTF-8 in a string field (proto3 refuses it) learns
// nothing. gRPC parses every unary message through SerializationTraits<MessageLite> (its base
// type), and streamed ones through SerializationTraits<TheType>. This header specializes the first;
// hetpool_requests.h the streamed request types of hetpool's API. cmake/HetpoolProto.cmake puts
// `#include "request_parsing.h"` first in every generated *.grpc.pb.h of the project (hetpool's,
// etcd's, the tests'), so every translation unit that could instantiate these traits sees the same
// specialization. Parsing that succeeds is exactly gRPC's own (zero-copy, same limits).
#pragma once

#include <string>
#include <string_view>

#include "google/protobuf/message.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace hetpool::rpc {

// Parses `buffer` into `message`. When the bytes are not a valid message the status says why:
// "field spec.env[HOME] of SubmitJobRequest is not valid UTF-8 (...)", or that the bytes are not
// a `hetpool.v1.SubmitJobRequest` at all. The code is INVALID_ARGUMENT for hetpool's own messages
// (what clients send the daemon) and INTERNAL for others (a peer's reply that does not parse).
grpc::Status ParseRequest(grpc::ByteBuffer* buffer, google::protobuf::MessageLite* message);

// The dotted path of the first string field in `bytes` (a serialized `descriptor` message) that
// holds invalid UTF-8, e.g. `spec.command[2]`; empty when there is none. Exposed for tests.
std::string FirstInvalidUtf8Field(const google::protobuf::Descriptor& descriptor, std::string_view bytes);

}  // namespace hetpool::rpc

// The traits of one message type: gRPC's serialization, ParseRequest's parsing.
#define HETPOOL_PARSE_NAMING_FIELD(Type)                                                   \
  template <>                                                                              \
  class SerializationTraits<Type, void> {                                                  \
   public:                                                                                 \
    static Status Serialize(const protobuf::MessageLite& msg, ByteBuffer* bb, bool* own) { \
      return GenericSerialize<ProtoBufferWriter, Type>(msg, bb, own);                      \
    }                                                                                      \
    static Status Deserialize(ByteBuffer* buffer, protobuf::MessageLite* msg) {            \
      return ::hetpool::rpc::ParseRequest(buffer, msg);                                    \
    }                                                                                      \
  };

namespace grpc {
HETPOOL_PARSE_NAMING_FIELD(protobuf::MessageLite)
}  // namespace grpc
