// RetryPolicy: retries a gRPC call refused with UNAVAILABLE (server not up
// yet, restarting, connection reset) with exponential backoff and full
// jitter, bounded in count and in total sleep time; the log lines of a
// call's retries are paced by a LogPacer (common/log_pacer.h).
//
// Thread-safe: several shard threads may call Run concurrently (the jitter
// generator is guarded by a mutex; each Run paces its own log lines).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "common/log_pacer.h"
#include "rpc/transport_failure.h"
#include "security/transport_security.h"

namespace loco {

struct RetryOptions {
  int max_retries = 8;  // < 0: no count limit, only retry_budget_ms
  int initial_backoff_ms = 50;
  int max_backoff_ms = 2000;
  int retry_budget_ms = 30000;  // total sleep allowed for one Run
};

class RetryPolicy {
 public:
  RetryPolicy(RetryOptions options, uint64_t jitter_seed)
      : options_(options), rng_(jitter_seed) {}

  // Calls `attempt` (which must build a fresh grpc::ClientContext each time)
  // until it returns something other than UNAVAILABLE, the retry count or
  // the budget runs out. Returns the last status, except for an
  // UNAVAILABLE that no retry cures (this process's TLS handshake refused
  // the peer: rpc/transport_failure.h), which ends the retries at once as
  // UNAUTHENTICATED with the setting to check appended. An UNAVAILABLE
  // returned when the retries run out carries the hint for its cause, if
  // one is known (refused, name not resolved, closed while connecting). `what` names the call in
  // the log lines written before the retries (the first three, then one
  // per 10 s with the count in between); a line carries a cause's hint
  // when it differs from the last one shown, so a loop whose first failure
  // had none (a peer killed mid-call) still names the next cause. `pacer`, when set, paces them
  // across Runs: a loop that calls Run again while a server is away passes
  // one for the whole loop (not owned; one Run at a time may use it).
  // `stop`, when set and true, ends the retries (checked between attempts
  // and every 50 ms of a backoff): Run returns the last UNAVAILABLE.
  grpc::Status Run(const std::string& what, const std::function<grpc::Status()>& attempt,
                   LogPacer* pacer = nullptr, const std::atomic<bool>* stop = nullptr);

  // Asked, at most once per kClosedAtConnectCheckEvery within a Run, when a
  // connection was closed while it was being set up (kClosedAtConnect in
  // rpc/transport_failure.h), with gRPC's message: why no retry can
  // succeed, or nullopt. A reason ends the Run at once as UNAUTHENTICATED,
  // the reason appended (TransportSecurity::RefusalOfThisTransport: a
  // plaintext client at a TLS peer, a client without a certificate at one
  // that requires it). Must be thread-safe; may block for a probe. Set it
  // before the first Run.
  using ClosedAtConnectCheck = std::function<std::optional<std::string>(std::string_view)>;
  void SetClosedAtConnectCheck(ClosedAtConnectCheck check) { closed_at_connect_check_ = check; }
  static constexpr std::chrono::seconds kClosedAtConnectCheckEvery =
      TransportSecurity::kRefusalProbeEvery;

  // The sleep before retry number `retry` (0-based): uniform in
  // [0, min(max_backoff, initial · 2^retry)] milliseconds.
  std::chrono::milliseconds Backoff(int retry);

  // Sleeps for `wait`, or less once `stop` (when set) is true: it is
  // checked every 50 ms.
  static void Pause(std::chrono::milliseconds wait, const std::atomic<bool>* stop);

 private:
  // The check's answer for this attempt's failure, when it is due (the
  // first closed-at-connect of a Run, then once per kClosedAtConnectCheckEvery).
  std::optional<std::string> CheckClosedAtConnect(
      TransportFailure failure, const grpc::Status& s,
      std::optional<std::chrono::steady_clock::time_point>* last_check) const;

  RetryOptions options_;
  ClosedAtConnectCheck closed_at_connect_check_;
  std::mutex mu_;
  std::mt19937_64 rng_;
};

}  // namespace loco
