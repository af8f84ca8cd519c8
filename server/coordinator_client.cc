#include "server/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include "common/log.h"
#include "rpc/reconnect_backoff.h"
#include "rpc/rpc_status.h"

namespace loco {

CoordinatorClient::CoordinatorClient(const std::string& address,
                                     std::chrono::milliseconds rpc_timeout)
    : address_(address), rpc_timeout_(rpc_timeout) {}

void CoordinatorClient::Connect(const TransportSecurity& security) {
  // Redial within a second of a coordinator's restart: the recovery waits
  // for every server's registration, so a late dial lengthens the pause.
  grpc::ChannelArguments args;
  SetReconnectBackoff(&args, kMaxReconnectBackoffMs);
  stub_ = v1::Coordinator::NewStub(security.CreateChannel(address_, args));
}

Status CoordinatorClient::NotConnected() const {
  return FailedPrecondition("the client of coordinator " + address_ + " is not connected yet");
}

void CoordinatorClient::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + rpc_timeout_);
}

Status CoordinatorClient::CheckIncarnation(uint64_t incarnation, const char* rpc) {
  uint64_t newest = newest_incarnation_.load();
  while (incarnation > newest) {
    if (newest_incarnation_.compare_exchange_weak(newest, incarnation)) {
      if (newest != 0) {
        LOG_WARN("coordinator " << address_ << " restarted: incarnation " << newest << " -> "
                                << incarnation);
      }
      return Status::Ok();
    }
  }
  if (incarnation < newest) {
    return Unavailable(std::string(rpc) + " at coordinator " + address_ + ": an answer of "
                       "incarnation " + std::to_string(incarnation) + ", older than " +
                       std::to_string(newest) + " seen before; ignored, retry");
  }
  return Status::Ok();
}

StatusOr<v1::RegisterServerResponse> CoordinatorClient::RegisterServer(
    const v1::RegisterServerRequest& req) {
  if (!stub_) return NotConnected();
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::RegisterServerResponse resp;
  Status s = FromGrpcStatus(stub_->RegisterServer(&ctx, req, &resp));
  if (!s.ok()) return s.Annotate("RegisterServer at coordinator " + address_);
  LOCO_RETURN_IF_ERROR(CheckIncarnation(resp.incarnation(), "RegisterServer"));
  return resp;
}

StatusOr<v1::ClusterView> CoordinatorClient::GetClusterView() {
  if (!stub_) return NotConnected();
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ClusterView view;
  Status s = FromGrpcStatus(stub_->GetClusterView(&ctx, v1::GetClusterViewRequest(), &view));
  if (!s.ok()) return s.Annotate("GetClusterView at coordinator " + address_);
  LOCO_RETURN_IF_ERROR(CheckIncarnation(view.incarnation(), "GetClusterView"));
  return view;
}

StatusOr<v1::StepParticipantsResponse> CoordinatorClient::GetStepParticipants(
    uint64_t step, uint32_t shard_id, uint32_t pushes_received) {
  if (!stub_) return NotConnected();
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::StepParticipantsRequest req;
  req.set_step(step);
  req.set_shard_id(shard_id);
  req.set_pushes_received(pushes_received);
  v1::StepParticipantsResponse resp;
  Status s = FromGrpcStatus(stub_->GetStepParticipants(&ctx, req, &resp));
  if (!s.ok()) return s.Annotate("GetStepParticipants at coordinator " + address_);
  LOCO_RETURN_IF_ERROR(CheckIncarnation(resp.incarnation(), "GetStepParticipants"));
  return resp;
}

}  // namespace loco
