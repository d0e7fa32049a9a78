// The agent's channel to hetpoold and the wait between registrations. After a daemon restart
// every agent registers again; with a plain backoff (200 ms doubling to 5 s) an agent tries at
// 0.2, 0.6, 1.4, 3.0, 6.2 s, so a daemon back after 3.1 s heard from its fleet only at 6.2 s
// (the fleet bench's first placement after a restart followed that schedule). Waiting on the
// channel's own connection instead finds the daemon within a second of it listening.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace hetpool::agent {

// Channel arguments for an agent's connection: gRPC reconnects after 200 ms, backing off to at
// most 1 s (its default is 1 s to 120 s). A refused connection costs a stopped daemon nothing.
grpc::ChannelArguments DaemonChannelArguments();

std::shared_ptr<grpc::Channel> MakeDaemonChannel(const std::string& address,
                                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials);

// Waits `backoff`, calling `tick` every `period` (it returns false to stop waiting), and returns
// early, true, once `channel` (may be null: wait the whole backoff) connects. Give a channel only
// when the daemon could not be reached: one that answered with an error gets the whole backoff,
// or a thousand agents would retry against a struggling daemon at once.
bool WaitForDaemon(grpc::Channel* channel, absl::Duration backoff, absl::Duration period,
                   const std::function<bool()>& tick);

}  // namespace hetpool::agent
