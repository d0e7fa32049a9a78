// The rendezvous port a launch hosts (issue 62): the daemon hands rank 0's node a port of
// --rdzv-port-range without asking the node, and any other process may listen there (a user's
// own torchrun, another tool). Before torchrun starts, the agent checks the port can be bound
// as torchrun's TCPStore binds it; a port in use refuses the launch as the node's
// (RendezvousPortTaken), and the daemon requeues the job on another port without spending a
// restart. A bind that fails inside torchrun all the same (the port taken in between) is read
// from its output as the same.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace hetpool::agent {

inline constexpr char kRendezvousPortTaken[] = "RendezvousPortTaken";

// The port of `argv`'s --rdzv_endpoint when its --rdzv_conf says this node hosts the store
// (is_host=1); 0 otherwise (a one-node job's port 0, a node that joins another's).
int HostedRendezvousPort(const std::vector<std::string>& argv);

// "" when `port` can be bound for listening on every address (IPv4 and, where the host has it,
// IPv6), as torchrun's store does (SO_REUSEADDR, so a closed predecessor's TIME_WAIT is no
// obstacle); else why not ("rendezvous port 29500 is in use on this node").
std::string WhyRendezvousPortUnusable(int port);

// A port free for listening on this node now, as the kernel picks one (port 0): the MASTER_PORT
// of a job the agent starts without torchrun, which picks one the same way for its workers. 0
// when none can be had.
int PickFreePort();

// Whether torchrun's output says its store could not bind (errno 98).
bool SaysRendezvousBindFailed(absl::string_view log);

}  // namespace hetpool::agent
