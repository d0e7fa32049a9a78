// gRPC channel arguments that bound how long a channel waits before it reconnects, for every
// client of hetpool that must notice a server back from an outage soon (the agent's channel to
// hetpoold, hetpoold's to etcd). gRPC's default backoff grows to two minutes,
// and a channel waiting it out fails every call at once.
#pragma once

#include "absl/time/time.h"
#include "grpcpp/support/channel_arguments.h"

namespace hetpool {

// Reconnect after `initial`, then backing off to at most `max`. GRPC_ARG_MIN_RECONNECT_BACKOFF_MS
// is deliberately left alone: gRPC reads it as the time a connection attempt is given (20 s by
// default), and a short one fails every handshake to a distant or busy server (TLS to a far
// daemon, an etcd under load), which then is never reached.
grpc::ChannelArguments ReconnectBackoff(absl::Duration initial = absl::Milliseconds(200),
                                        absl::Duration max = absl::Seconds(1));

}  // namespace hetpool
