#include "src/agent/daemon_channel.h"

#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"

namespace hetpool::agent {

grpc::ChannelArguments DaemonChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC reads it as the shortest time a connection
  // attempt is given (20 s by default), and 200 ms cannot hold a TLS handshake to a distant or
  // busy daemon, which then is never reached.
  return args;
}

std::shared_ptr<grpc::Channel> MakeDaemonChannel(const std::string& address,
                                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  return grpc::CreateCustomChannel(address, credentials, DaemonChannelArguments());
}

bool WaitForDaemon(grpc::Channel* channel, absl::Duration backoff, absl::Duration period,
                   const std::function<bool()>& tick) {
  for (absl::Time until = absl::Now() + backoff; absl::Now() < until;) {
    if (!tick()) return false;
    // try_to_connect: an idle channel starts connecting; one in backoff keeps its schedule.
    if (channel != nullptr && channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) return true;
    absl::SleepFor(std::min(period, until - absl::Now()));
  }
  return false;
}

}  // namespace hetpool::agent
