// CoordinatorClient: a parameter server's calls to the coordinator, each with
// a deadline (no call waits longer than `rpc_timeout`), over a channel
// secured by a TransportSecurity.
//
// Connect() must be called once before any call and before the client is
// shared between threads; calls before it fail with FAILED_PRECONDITION.
// After that, thread-safe (gRPC stubs are).
//
// Incarnations: the client remembers the newest coordinator incarnation it
// has seen (ClusterView.incarnation and the other answers'); an answer of
// an older one (a coordinator that was replaced and still answers, or a
// delayed reply) is refused with UNAVAILABLE, so that the caller retries
// and never adopts it. A newer one is logged: the coordinator restarted.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "proto/loco.grpc.pb.h"
#include "security/transport_security.h"

namespace loco {

class CoordinatorClient {
 public:
  // The longest gap between two dials of a coordinator that is down: what a
  // restart may add to the pause on top of the outage itself.
  static constexpr int kMaxReconnectBackoffMs = 1000;

  CoordinatorClient(const std::string& address, std::chrono::milliseconds rpc_timeout);

  // Opens the channel with `security`'s client credentials and token; a
  // lost connection is dialled again at most kMaxReconnectBackoffMs apart.
  void Connect(const TransportSecurity& security);

  // Sends `req` (shard_id, address and what the shard reports); returns the
  // answer (the cluster's number of shards, the worker-ticket key).
  StatusOr<v1::RegisterServerResponse> RegisterServer(const v1::RegisterServerRequest& req);
  StatusOr<v1::ClusterView> GetClusterView();
  StatusOr<v1::StepParticipantsResponse> GetStepParticipants(uint64_t step, uint32_t shard_id,
                                                             uint32_t pushes_received);

  const std::string& address() const { return address_; }

 private:
  void SetDeadline(grpc::ClientContext* ctx) const;
  Status NotConnected() const;
  // OK when `incarnation` is not older than the newest seen (recording it);
  // Unavailable naming both otherwise.
  Status CheckIncarnation(uint64_t incarnation, const char* rpc);

  std::string address_;
  std::chrono::milliseconds rpc_timeout_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::atomic<uint64_t> newest_incarnation_{0};
};

}  // namespace loco
