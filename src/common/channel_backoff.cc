#include "src/common/channel_backoff.h"

namespace hetpool {

grpc::ChannelArguments ReconnectBackoff(absl::Duration initial, absl::Duration max) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(absl::ToInt64Milliseconds(initial)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(absl::ToInt64Milliseconds(max)));
  return args;
}

}  // namespace hetpool
