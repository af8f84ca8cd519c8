// client/worker.h is the client library's one public header and brings
// neither gRPC nor protobuf nor the library's internals with it: this file
// includes it first and alone, and does not compile if they came in. What
// it declares is enough to configure a worker and to name every call.
#include "client/worker.h"

#if defined(GRPCPP_GRPCPP_H) || defined(GRPC_GRPC_H) || defined(GRPCPP_SUPPORT_STATUS_H) || \
    defined(GRPCPP_IMPL_CODEGEN_STATUS_H) || defined(GRPC_IMPL_CODEGEN_GRPC_TYPES_H)
#error "client/worker.h must not include gRPC"
#endif
#if defined(GOOGLE_PROTOBUF_VERSION) || defined(GOOGLE_PROTOBUF_MESSAGE_H__) || \
    defined(GOOGLE_PROTOBUF_PORT_DEF_INCLUDED)
#error "client/worker.h must not include protobuf"
#endif

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

namespace loco {
namespace {

// An interface: the implementation (client/worker_impl.h) is not visible
// here, and callers hold a Worker through the pointer Connect returns.
static_assert(std::is_abstract_v<Worker>);
static_assert(std::has_virtual_destructor_v<Worker>);
static_assert(!std::is_copy_constructible_v<Worker>);

TEST(WorkerHeaderTest, ConnectValidatesOptionsWithThePublicHeaderAlone) {
  WorkerOptions o;
  o.security = TransportSecurityOptions::Insecure();
  o.coordinator = "127.0.0.1:1";  // nothing listens: Connect opens a lazy channel
  o.codec = PushCodec::kBf16;
  StatusOr<std::unique_ptr<Worker>> w = Worker::Connect(o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->num_elements(), 0u);
  EXPECT_TRUE((*w)->shard_ranges().empty());
  EXPECT_NE((*w)->metrics_registry(), nullptr);
  EXPECT_TRUE((*w)->Leave().ok());  // never joined
  o.block_size = 100;
  o.codec = PushCodec::kLoco;
  EXPECT_EQ(Worker::Connect(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkerHeaderTest, PushCodecNamesRoundTripAndABadNameListsTheChoices) {
  for (PushCodec c : {PushCodec::kFp32, PushCodec::kBf16, PushCodec::kNaive, PushCodec::kEf,
                      PushCodec::kLoco}) {
    const StatusOr<PushCodec> parsed = ParsePushCodec(PushCodecName(c));
    ASSERT_TRUE(parsed.ok()) << PushCodecName(c);
    EXPECT_EQ(parsed.value(), c);
    EXPECT_EQ(IsBlockCodec(c), c != PushCodec::kFp32 && c != PushCodec::kBf16);
  }
  const StatusOr<PushCodec> bad = ParsePushCodec("int4");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  for (const char* name : {"fp32", "bf16", "naive", "ef", "loco", "int4"}) {
    EXPECT_NE(bad.status().message().find(name), std::string::npos) << bad.status().ToString();
  }
  EXPECT_FALSE(ParsePushCodec("LOCO").ok());
  EXPECT_FALSE(ParsePushCodec("").ok());
  EXPECT_STREQ(PushCodecName(static_cast<PushCodec>(99)), "?");
  EXPECT_FALSE(IsKnownPushCodec(static_cast<PushCodec>(99)));
}

}  // namespace
}  // namespace loco
