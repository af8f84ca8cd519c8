// FakeCoordinator: a loco.v1.Coordinator that answers from fixed data, on a
// loopback port, for the request fuzzer (the unit under test there is the
// parameter server's validation, not membership). Members are {1, 2}; one
// shard covers [0, kTotal). Like Membership, it knows the cluster's newest
// step (kNewestKnownStep, the restored seed's version) and refuses to name
// the participants of a step past the one after it (FAILED_PRECONDITION);
// every other step's participants are {1, 2}.
//
// Thread-safe (the answers are constant).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "proto/loco.grpc.pb.h"

namespace loco::fuzz {

class FakeCoordinator final : public v1::Coordinator::Service {
 public:
  static constexpr uint64_t kTotal = 300;  // blocks of 128: a short last block
  static constexpr uint32_t kBlock = 128;
  static constexpr uint64_t kNewestKnownStep = 5;

  // Starts serving on 127.0.0.1 (a port of the kernel's choosing); aborts
  // when it cannot, since the fuzzer cannot run without it.
  FakeCoordinator();
  ~FakeCoordinator() override;
  std::string address() const { return address_; }

  grpc::Status GetClusterView(grpc::ServerContext*, const v1::GetClusterViewRequest*,
                              v1::ClusterView* view) override;
  grpc::Status GetStepParticipants(grpc::ServerContext*, const v1::StepParticipantsRequest* req,
                                   v1::StepParticipantsResponse* resp) override;

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace loco::fuzz
