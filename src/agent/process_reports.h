// What the agent tells the daemon of each job generation on the node, at registration and in
// every heartbeat: running or exited (an exit only once its log is all with the daemon, so `wait`
// then `logs` is whole), how it exited or failed, its ranks, confinement and leftovers.
#pragma once

#include <map>
#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "hetpool/v1/agent.pb.h"
#include "src/agent/runner.h"

namespace hetpool::agent {

void ReportProcesses(const std::map<Runner::Key, ProcessRecord>& records, const std::string& node_name,
                     google::protobuf::RepeatedPtrField<hetpool::v1::ProcessStatus>& out);

}  // namespace hetpool::agent
