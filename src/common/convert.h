// Conversions between the libraries' plain types (include/hetpool) and the API's protobuf
// messages, kept at the service boundary in one place.
#pragma once

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "hetpool/device.h"
#include "hetpool/v1/common.pb.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool {

// A health signal's severity in words ("fatal", "degraded", "noted"), and back (unknown: noted).
const char* SeverityName(Severity severity);
Severity ParseSeverity(const std::string& name);

namespace pb = ::hetpool::v1;

pb::Device ToProto(const DeviceRecord& device);
pb::NodeInventory ToProto(const NodeInventory& inventory);
// Validates what an agent sent: vendors known, ids unique, links point inside the node.
absl::StatusOr<NodeInventory> FromProto(const pb::NodeInventory& inventory);

google::protobuf::Timestamp ToProtoTime(absl::Time t);
absl::Time FromProtoTime(const google::protobuf::Timestamp& t);
absl::Duration FromProtoDuration(const google::protobuf::Duration& d);

// "PENDING", "RUNNING", ... (the enum name without its prefix).
absl::string_view JobStateName(pb::JobState state);
absl::StatusOr<pb::JobState> ParseJobState(absl::string_view name);
bool IsTerminal(pb::JobState state);

}  // namespace hetpool
