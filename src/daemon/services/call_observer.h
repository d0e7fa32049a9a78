// What the API door (Guarded) tells whoever watches it, the metrics module: each call's method,
// how it ended and how long the daemon took to answer it. No Prometheus here, as in
// state_observer.h.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hetpool::daemon {

class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // From the handler's start to its answer: gRPC's own queueing and the network are the
  // client's to see. For a stream, its whole life.
  virtual void Call(absl::string_view method, absl::StatusCode code, absl::Duration took) = 0;
};

}  // namespace hetpool::daemon
