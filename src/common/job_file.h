// The job-file form of what protobuf's JSON mapping of JobSpec cannot spell: an elastic job
// writes `"nnodes": {"min": 2, "max": 8}` (JobSpec.nnodes is a number), which is read as
// `"nnodes": 2, "elastic_nnodes": {"min": 2, "max": 8}`. Everything else passes unchanged.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hetpool {

// The job file with its shorthands written out, or INVALID_ARGUMENT saying what is wrong with
// one. Text that is not a JSON object is returned as it is, for the protobuf parser to refuse.
absl::StatusOr<std::string> ExpandJobFileShorthands(absl::string_view json);

}  // namespace hetpool
