// Fuzz target: bytes -> v1::Payload -> OwnedPayload::FromProto against a
// shard range -> CheckGradientMagnitude -> cpu::DecodeAccumulate.
//
// Invariants (a violation aborts, which libFuzzer reports as a crash):
// * no crash, no sanitizer report, whatever the bytes;
// * a payload FromProto accepts passes the kernels' own ValidatePayload and
//   decodes without error;
// * when its magnitude is accepted too, every decoded value is finite and
//   within kMaxAbsGradient (what the server's AdamW relies on; without that
//   check a finite scale such as FLT_MAX times a code overflows).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz/require.h"
#include "kernels/decode_accumulate.h"
#include "server/owned_payload.h"

namespace {

using loco::fuzz::Require;

void Check(const loco::v1::Payload& wire, loco::ShardRange range) {
  auto payload = loco::OwnedPayload::FromProto(wire, range);
  if (!payload.ok()) {
    Require(!payload.status().message().empty(), "a refusal without a message");
    return;
  }
  Require(loco::ValidatePayload(payload->view(), range.length).ok(),
          "FromProto accepted what ValidatePayload refuses");
  const bool bounded = payload->CheckGradientMagnitude().ok();
  std::vector<float> out(range.length);
  const loco::PayloadView view = payload->view();
  Require(loco::cpu::DecodeAccumulate(&view, 1, range.length, out.data()).ok(),
          "an accepted payload failed to decode");
  if (!bounded) return;  // e.g. a scale of FLT_MAX: code * scale may be Inf
  for (float x : out) {
    Require(std::isfinite(x), "a bounded payload decoded to a non-finite value");
    Require(std::fabs(x) <= loco::kMaxAbsGradient, "a bounded payload decoded beyond the bound");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loco::v1::Payload wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return 0;
  // A fixed shard range, as the server has it ([128, 1128): a short last
  // block for blocks of 128 and more)...
  Check(wire, loco::ShardRange{128, 1000});
  // ...and the range the payload claims, so that the codec checks are reached
  // for any small length (the server never takes a range from the wire).
  if (wire.length() <= (uint64_t{1} << 16) && wire.offset() <= (uint64_t{1} << 40)) {
    Check(wire, loco::ShardRange{wire.offset(), wire.length()});
  }
  return 0;
}
