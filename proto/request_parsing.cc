#include "request_parsing.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "src/common/utf8.h"

namespace hetpool::rpc {
namespace {

namespace gp = ::google::protobuf;

std::string Walk(const gp::Descriptor& descriptor, std::string_view bytes, const std::string& prefix, int depth) {
  gp::UnknownFieldSet fields;
  // Depth bound: protobuf itself refuses nesting past 100, and a request this deep is garbage.
  if (depth > 100 || !fields.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return "";
  std::vector<int> seen(static_cast<size_t>(descriptor.field_count()), 0);
  for (int i = 0; i < fields.field_count(); ++i) {
    const gp::UnknownField& field = fields.field(i);
    if (field.type() != gp::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const gp::FieldDescriptor* fd = descriptor.FindFieldByNumber(field.number());
    if (fd == nullptr) continue;
    const int index = seen[static_cast<size_t>(fd->index())]++;
    std::string path = absl::StrCat(prefix, fd->name());
    const std::string& value = field.length_delimited();
    if (fd->is_map()) {
      const gp::Descriptor& entry = *fd->message_type();
      gp::UnknownFieldSet kv;
      if (!kv.ParseFromString(value)) continue;
      std::string key;
      for (int k = 0; k < kv.field_count(); ++k) {
        if (kv.field(k).number() == 1 && kv.field(k).type() == gp::UnknownField::TYPE_LENGTH_DELIMITED)
          key = kv.field(k).length_delimited();
      }
      if (entry.map_key()->type() == gp::FieldDescriptor::TYPE_STRING && !IsValidUtf8(key))
        return absl::StrCat(path, " (a key)");
      std::string inner = Walk(entry, value, "", depth + 1);
      // The key is valid UTF-8 here; a long one is cut so the error stays short.
      if (!inner.empty()) return absl::StrCat(path, "[", ValidUtf8(key, 64), "]");
      continue;
    }
    if (fd->is_repeated()) absl::StrAppend(&path, "[", index, "]");
    if (fd->type() == gp::FieldDescriptor::TYPE_STRING) {
      if (!IsValidUtf8(value)) return path;
    } else if (fd->type() == gp::FieldDescriptor::TYPE_MESSAGE) {
      std::string inner = Walk(*fd->message_type(), value, path + ".", depth + 1);
      if (!inner.empty()) return inner;
    }
  }
  return "";
}

}  // namespace

std::string FirstInvalidUtf8Field(const gp::Descriptor& descriptor, std::string_view bytes) {
  return Walk(descriptor, bytes, "", 0);
}

grpc::Status ParseRequest(grpc::ByteBuffer* buffer, gp::MessageLite* message) {
  if (buffer == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "no payload");
  {
    // What gRPC's own GenericDeserialize does: parse straight from the slices.
    grpc::ProtoBufferReader reader(buffer);
    if (!reader.status().ok()) return reader.status();
    if (message->ParseFromZeroCopyStream(&reader)) {
      buffer->Clear();
      return grpc::Status::OK;
    }
  }
  // Refused: find out why, from a copy of the bytes.
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (buffer->Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  buffer->Clear();
  const auto* full = dynamic_cast<const gp::Message*>(message);
  if (full == nullptr) {
    return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("not a valid ", message->GetTypeName(), " message"));
  }
  const gp::Descriptor& descriptor = *full->GetDescriptor();
  const grpc::StatusCode code = absl::StartsWith(descriptor.full_name(), "hetpool.")
                                    ? grpc::StatusCode::INVALID_ARGUMENT
                                    : grpc::StatusCode::INTERNAL;
  const std::string field = FirstInvalidUtf8Field(descriptor, bytes);
  if (!field.empty()) {
    return grpc::Status(code, absl::StrCat("field ", field, " of ", descriptor.name(),
                                           " is not valid UTF-8 (string fields must be UTF-8)"));
  }
  return grpc::Status(code, absl::StrCat("request is not a valid ", descriptor.full_name(), " protobuf message (",
                                         bytes.size(), " bytes)"));
}

}  // namespace hetpool::rpc
