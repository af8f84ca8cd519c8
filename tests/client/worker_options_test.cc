// ValidateWorkerOptions without a server: the quantisation options (bits,
// block_size) are checked for the block codecs, which read them, and not
// for fp32 and bf16, which never do.
#include "client/worker_options.h"

#include <gtest/gtest.h>

#include <string>

namespace loco {
namespace {

// Valid options but for the fields a test sets.
WorkerOptions ValidOptions(PushCodec codec) {
  WorkerOptions o;
  o.coordinator = "127.0.0.1:1";
  o.security = TransportSecurityOptions::Insecure();
  o.codec = codec;
  return o;
}

TEST(WorkerOptionsTest, Fp32AndBf16IgnoreBitsAndBlockSize) {
  for (const PushCodec codec : {PushCodec::kFp32, PushCodec::kBf16}) {
    WorkerOptions o = ValidOptions(codec);
    o.bits = 32;  // what a caller who thinks in float widths passes
    EXPECT_TRUE(ValidateWorkerOptions(o).ok()) << PushCodecName(codec);
    o.bits = 0;
    o.block_size = 100;
    const Status checked = ValidateWorkerOptions(o);
    EXPECT_TRUE(checked.ok()) << PushCodecName(codec) << ": " << checked.ToString();
  }
}

TEST(WorkerOptionsTest, BlockCodecsRefuseBadBitsAndBlockSize) {
  for (const PushCodec codec : {PushCodec::kNaive, PushCodec::kEf, PushCodec::kLoco}) {
    WorkerOptions o = ValidOptions(codec);
    EXPECT_TRUE(ValidateWorkerOptions(o).ok()) << PushCodecName(codec);
    o.bits = 32;
    const Status bits = ValidateWorkerOptions(o);
    EXPECT_EQ(bits.code(), StatusCode::kInvalidArgument) << PushCodecName(codec);
    EXPECT_NE(bits.message().find("WorkerOptions.bits/block_size: bits 32"), std::string::npos)
        << bits.ToString();
    o.bits = 8;
    o.block_size = 100;
    const Status block = ValidateWorkerOptions(o);
    EXPECT_EQ(block.code(), StatusCode::kInvalidArgument) << PushCodecName(codec);
    EXPECT_NE(block.message().find("block_size 100"), std::string::npos) << block.ToString();
  }
}

}  // namespace
}  // namespace loco
