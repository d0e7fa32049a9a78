// What hetpoold replicas on etcd say about who leads, to each other and to their clients
// (src/daemon/services/leader_gate.h): the mark on a call a follower passed on to the leader,
// and the start of a follower's refusal. Agents, hetpoolctl and the Python client read them to
// go to the leader.
#pragma once

#include "absl/strings/string_view.h"

namespace hetpool {

// Set on a call a follower passed on (so it is never passed on again); a client that sets it
// asks a replica to answer for itself: a follower then refuses, naming the leader.
inline constexpr char kForwardedHeader[] = "x-hetpool-forwarded";
// UNAVAILABLE messages of a replica that is not the leader: "not the leader; the leader is at
// HOST:PORT", or "not the leader; " and why no leader is known.
inline constexpr absl::string_view kNotTheLeader = "not the leader; ";
inline constexpr absl::string_view kLeaderIsAt = "not the leader; the leader is at ";

}  // namespace hetpool
