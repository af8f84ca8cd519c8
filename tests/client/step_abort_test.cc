// StepAbort without a server: the first reason is kept, and a context
// registered after the abort is cancelled at once: its call, started later
// on a channel to nowhere, ends CANCELLED instead of waiting out its
// deadline. Against real servers: WorkerStepHyperTest.
// WorkersThatEachWinOneShardBothFailAtOnce.
#include "client/step_abort.h"

#include <gtest/gtest.h>
#include <grpcpp/create_channel.h>

#include <chrono>

#include "proto/loco.grpc.pb.h"

namespace loco {
namespace {

TEST(StepAbort, TheFirstReasonIsKept) {
  StepAbort abort;
  EXPECT_FALSE(abort.aborted());
  EXPECT_TRUE(abort.reason().ok());
  abort.Abort(InvalidArgument("first"));
  abort.Abort(InvalidArgument("second"));
  EXPECT_TRUE(abort.aborted());
  EXPECT_EQ(abort.reason().message(), "first");
}

TEST(StepAbort, ACallRegisteredAfterTheAbortIsCancelledAtOnce) {
  StepAbort abort;
  abort.Abort(InvalidArgument("refused"));
  // Port 9 on loopback: nothing listens; wait_for_ready keeps the call
  // waiting for a connection until its deadline unless it is cancelled.
  auto channel = grpc::CreateChannel("127.0.0.1:9", grpc::InsecureChannelCredentials());
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const StepAbortScope scope(&abort, &ctx);
  v1::GetClusterViewRequest request;
  v1::ClusterView response;
  const auto started = std::chrono::steady_clock::now();
  const grpc::Status s = stub->GetClusterView(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

}  // namespace
}  // namespace loco
