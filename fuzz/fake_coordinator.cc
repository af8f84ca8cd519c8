#include "fuzz/fake_coordinator.h"

#include <cstdio>
#include <cstdlib>

namespace loco::fuzz {

FakeCoordinator::FakeCoordinator() {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    std::fprintf(stderr, "fake coordinator: cannot listen on 127.0.0.1\n");
    std::abort();
  }
  address_ = "127.0.0.1:" + std::to_string(port);
}

FakeCoordinator::~FakeCoordinator() { server_->Shutdown(); }

grpc::Status FakeCoordinator::GetClusterView(grpc::ServerContext*,
                                             const v1::GetClusterViewRequest*,
                                             v1::ClusterView* view) {
  view->set_epoch(2);
  view->add_worker_ids(1);
  view->add_worker_ids(2);
  auto* map = view->mutable_shard_map();
  map->set_total_elements(kTotal);
  map->set_block_size(kBlock);
  auto* shard = map->add_shards();
  shard->set_shard_id(0);
  shard->set_offset(0);
  shard->set_length(kTotal);
  shard->set_address("127.0.0.1:1");
  view->set_ready(true);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::GetStepParticipants(grpc::ServerContext*,
                                                  const v1::StepParticipantsRequest* req,
                                                  v1::StepParticipantsResponse* resp) {
  if (req->step() > kNewestKnownStep + 1) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "step " + std::to_string(req->step()) + " is ahead of the cluster");
  }
  resp->set_step(req->step());
  for (uint64_t id : {1, 2}) {
    resp->add_participants(id);
    resp->add_live(id);
  }
  resp->set_epoch(2);
  return grpc::Status::OK;
}

}  // namespace loco::fuzz
