// SetReconnectBackoff: how soon a client channel dials a peer again after
// losing it. gRPC's default backoff starts at 1 s and grows by 1.6x to
// 120 s, so after an outage of a few seconds the next dial can come long
// after the peer is back (after a 1 s coordinator outage a server's came
// ~9 s after the kill). Both sides' channels start at 100 ms and cap at
// `max_backoff_ms`; the callers' own retry budgets bound the total wait.
#pragma once

#include <grpcpp/support/channel_arguments.h>

#include <algorithm>

namespace loco {

inline void SetReconnectBackoff(grpc::ChannelArguments* args, int max_backoff_ms) {
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args->SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, std::max(100, max_backoff_ms));
}

}  // namespace loco
