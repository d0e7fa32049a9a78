// Duplicate keys in a JSON object: protobuf's JSON parser keeps the last one silently, so a job
// file with "nnodes" twice runs with whichever came second. Files people write are checked first.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hetpool {

// INVALID_ARGUMENT naming the first key that appears twice in one object (with its path, e.g.
// "env.NCCL_DEBUG"), or OK. Syntax errors are left to the parser that follows.
absl::Status CheckNoDuplicateKeys(absl::string_view json);

}  // namespace hetpool
