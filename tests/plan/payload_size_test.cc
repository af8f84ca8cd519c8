// PayloadBytes against the RPC layer's own payload sizes (rpc/payload_bytes.h,
// what the worker and the server put on the wire), and the planner's step
// bytes against the bytes bench/e2e's workers counted.
#include "plan/payload_size.h"

#include <gtest/gtest.h>

#include "plan/cost_model.h"
#include "rpc/payload_bytes.h"

namespace loco::plan {
namespace {

v1::Payload ProtoPayload(const WireEncoding& e) {
  v1::Payload p;
  switch (e.codec) {
    case WireCodec::kFp32: p.set_codec(v1::CODEC_FP32); break;
    case WireCodec::kBf16: p.set_codec(v1::CODEC_BF16); break;
    case WireCodec::kBlockQuant:
      p.set_codec(v1::CODEC_BLOCK_QUANT);
      p.set_bits(static_cast<uint32_t>(e.bits));
      p.set_block_size(static_cast<uint32_t>(e.block_size));
      break;
  }
  return p;
}

TEST(PayloadSizeTest, EqualsTheRpcLayersDataPlusScaleBytes) {
  const std::vector<WireEncoding> encodings = {
      {WireCodec::kFp32, 32, 0},          {WireCodec::kBf16, 16, 0},
      {WireCodec::kBlockQuant, 2, 32},    {WireCodec::kBlockQuant, 4, 128},
      {WireCodec::kBlockQuant, 4, 256},   {WireCodec::kBlockQuant, 8, 128},
      {WireCodec::kBlockQuant, 8, 4096}};
  for (const WireEncoding& e : encodings) {
    const v1::Payload proto = ProtoPayload(e);
    for (uint64_t n : {uint64_t{1}, uint64_t{31}, uint64_t{256}, uint64_t{257},
                       uint64_t{5939210}, uint64_t{5943296}, uint64_t{123456789}}) {
      EXPECT_EQ(PayloadBytes(e, n), PayloadDataBytes(proto, n) + PayloadScaleBytes(proto, n))
          << EncodingName(e) << " n=" << n;
    }
  }
}

TEST(PayloadSizeTest, RefusesBitsAndBlocksTheKernelsRefuse) {
  EXPECT_FALSE(ValidateEncoding({WireCodec::kBlockQuant, 3, 256}, "--bits").ok());
  EXPECT_FALSE(ValidateEncoding({WireCodec::kBlockQuant, 4, 100}, "--block").ok());
  EXPECT_TRUE(ValidateEncoding({WireCodec::kFp32, 0, 0}, "--codec").ok());
}

// bench/e2e/results/steps.csv, large model (11882506 parameters), W = 4,
// S = 2: the workers counted 6126921 pushed bytes per step (LoCo 4-bit,
// block 256) and 12253838 pulled (8-bit delta, block 128) outside the
// full-copy steps, 6312585 with 4-bit deltas, 23765012 with bf16.
TEST(PayloadSizeTest, StepBytesEqualWhatTheBenchmarksWorkersCounted) {
  ClusterSpec spec;
  spec.params = 11882506;
  spec.workers = 4;
  spec.shards = 2;
  spec.shared_cores = 2;
  Calibration c;
  c.link_efficiency = 1;
  StatusOr<Prediction> p = Predict(spec, c);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->push_bytes_per_worker, 6126921u);
  EXPECT_EQ(p->pull_bytes_per_worker, 12253838u);
  spec.pull.bits = 4;
  EXPECT_EQ(Predict(spec, c)->pull_bytes_per_worker, 6312585u);
  spec.pull = {WireCodec::kBf16, 16, 0};
  EXPECT_EQ(Predict(spec, c)->pull_bytes_per_worker, 23765012u);
  spec.push = {WireCodec::kFp32, 32, 0};
  EXPECT_EQ(Predict(spec, c)->push_bytes_per_worker, 47530024u);
}

}  // namespace
}  // namespace loco::plan
