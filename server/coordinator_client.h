// CoordinatorClient: a parameter server's calls to the coordinator, each with
// a deadline (no call waits longer than `rpc_timeout`), over a channel
// secured by a TransportSecurity.
//
// Connect() must be called once before any call and before the client is
// shared between threads; calls before it fail with FAILED_PRECONDITION.
// After that, thread-safe (gRPC stubs are).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "proto/loco.grpc.pb.h"
#include "security/transport_security.h"

namespace loco {

class CoordinatorClient {
 public:
  CoordinatorClient(const std::string& address, std::chrono::milliseconds rpc_timeout);

  // Opens the channel with `security`'s client credentials and token.
  void Connect(const TransportSecurity& security);

  // Returns the cluster's number of shards.
  StatusOr<uint32_t> RegisterServer(uint32_t shard_id, const std::string& address);
  StatusOr<v1::ClusterView> GetClusterView();
  StatusOr<v1::StepParticipantsResponse> GetStepParticipants(uint64_t step, uint32_t shard_id,
                                                             uint32_t pushes_received);

  const std::string& address() const { return address_; }

 private:
  void SetDeadline(grpc::ClientContext* ctx) const;
  Status NotConnected() const;

  std::string address_;
  std::chrono::milliseconds rpc_timeout_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace loco
