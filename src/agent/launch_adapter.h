// The launch adapter (issue 62, docs/adapters.md): a training script written for cuda and nccl,
// as public tutorials write it, runs unchanged on whatever card its job lands on. The agent keeps
// a Python start-up file (adapter/sitecustomize.py, compiled in) in a root-owned directory of its
// work dir and puts that directory first on each job's PYTHONPATH; HETPOOL_ADAPT names the steps
// for the node's vendor (VendorRuntime::adapter). The same file sends a torchrun worker's stderr
// into its stdout, which torchrun labels with the rank ("[default1]:"), so that a failure quotes
// the failing rank's own lines. The user's files are never edited.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "hetpool/v1/job.pb.h"
#include "src/agent/runner.h"

namespace hetpool::agent {

// The start-up file's text (embedded at build time).
std::string_view LaunchAdapterSource();

// Writes the start-up file into `dir` (made if missing, mode 0755; the file 0644), replacing an
// older agent's. Jobs read it; none can write it.
absl::Status InstallLaunchAdapter(const std::string& dir);

struct AdapterContext {
  std::string dir;          // where InstallLaunchAdapter wrote it; "" when it could not
  bool node_allows = true;  // hetpool-agent --adapt (an operator may turn it off per node)
  bool simulated = false;   // simulated cards: whatever the vendor, cuda runs on CPU with gloo
};

// Puts the adapter on `spec`'s PYTHONPATH (after none of the job's own entries is lost) with the
// steps `plan` calls for, and says in spec.note what it does: "adapted: cuda→cpu, nccl→gloo",
// "not adapted: cuda and nccl are this card's own", "not adapted (the job's \"adapt\": false)".
// A launch in an image is left alone (the file is not in the image).
void AdaptLaunch(const hetpool::v1::NodeLaunchPlan& plan, const AdapterContext& context, LaunchSpec& spec);

}  // namespace hetpool::agent
