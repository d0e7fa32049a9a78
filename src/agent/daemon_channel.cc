#include "src/agent/daemon_channel.h"

#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "src/common/channel_backoff.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {

grpc::ChannelArguments DaemonChannelArguments() { return ReconnectBackoff(); }

std::shared_ptr<grpc::Channel> MakeDaemonChannel(const std::string& address,
                                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  return grpc::CreateCustomChannel(address, credentials, DaemonChannelArguments());
}

bool WaitForDaemon(grpc::Channel* channel, absl::Duration backoff, absl::Duration period,
                   const std::function<bool()>& tick) {
  for (absl::Time until = MonotonicNow() + backoff; MonotonicNow() < until;) {
    if (!tick()) return false;
    // try_to_connect: an idle channel starts connecting; one in backoff keeps its schedule.
    if (channel != nullptr && channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) return true;
    absl::SleepFor(std::min(period, until - MonotonicNow()));
  }
  return false;
}

}  // namespace hetpool::agent
