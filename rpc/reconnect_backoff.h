// SetReconnectBackoff: how soon a client channel dials a peer again after
// losing it. gRPC's default backoff starts at 1 s and grows by 1.6x to
// 120 s, so after an outage of a few seconds the next dial can come long
// after the peer is back (after a 1 s coordinator outage a server's came
// ~9 s after the kill). Both sides' channels start at 100 ms and cap at
// `max_backoff_ms`; the callers' own retry budgets bound the total wait.
//
// The spacing of attempts and the time one attempt may take are separate:
// gRPC reads GRPC_ARG_MIN_RECONNECT_BACKOFF_MS as the minimum connect
// timeout (an attempt's deadline is max(next backoff, now + that value);
// gRPC's doc/connection-backoff.md, MIN_CONNECT_TIMEOUT). Set to 100 ms,
// as it once was here, it cut every attempt off after 0.1-1 s; on a loaded
// machine a worker's attempts to reach a just-restarted server then ended
// "tcp handshaker shutdown" for 9 s while the server was serving. So it
// stays at gRPC's own default, and only the backoff is shortened: a
// refused dial still fails at once and is retried after the backoff.
#pragma once

#include <grpcpp/support/channel_arguments.h>

#include <algorithm>

namespace loco {

inline constexpr int kInitialReconnectBackoffMs = 100;
inline constexpr int kMinConnectTimeoutMs = 20000;

inline void SetReconnectBackoff(grpc::ChannelArguments* args, int max_backoff_ms) {
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
  args->SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectTimeoutMs);
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
               std::max(kInitialReconnectBackoffMs, max_backoff_ms));
}

}  // namespace loco
