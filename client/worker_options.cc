#include "client/worker_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/host_port.h"
#include "kernels/loco_compress.h"
#include "kernels/quantize.h"

namespace loco {
namespace {

Status CheckRange(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return InvalidArgument(std::string("WorkerOptions.") + field + " = " + std::to_string(v) +
                           ": expected an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateWorkerOptions(const WorkerOptions& o) {
  if (Status address = CheckHostPort(o.coordinator); !address.ok()) {
    return InvalidArgument("WorkerOptions.coordinator = '" + o.coordinator +
                           "': " + address.message());
  }
  if (!IsKnownPushCodec(o.codec)) {
    return InvalidArgument("WorkerOptions.codec = " + std::to_string(static_cast<int>(o.codec)) +
                           ": not a PushCodec; expected one of " +
                           std::string(kPushCodecChoices));
  }
  // bits and block_size shape the block codecs' quantisation only: fp32 and
  // bf16 send every element and never read them, so a value that would be
  // wrong for a block codec (bits=32 with fp32) is no reason to refuse them.
  if (IsBlockCodec(o.codec)) {
    Status q = ValidateQuantizeParams(o.bits, o.block_size);
    if (!q.ok()) return q.Annotate("WorkerOptions.bits/block_size");
  }
  if (!std::isfinite(o.beta) || o.beta < 0.0f || o.beta >= 1.0f) {
    return InvalidArgument("WorkerOptions.beta = " + std::to_string(o.beta) +
                           ": expected a number in [0, 1)");
  }
  LOCO_RETURN_IF_ERROR(CheckRange("reset_period", o.reset_period, 0,
                                  std::numeric_limits<int32_t>::max()));
  if (o.error_bits != 8 && o.error_bits != 32) {
    return InvalidArgument("WorkerOptions.error_bits = " + std::to_string(o.error_bits) +
                           ": expected 8 (int8 error state) or 32 (fp32 error state)");
  }
  LOCO_RETURN_IF_ERROR(CheckRange("gradient_device", o.gradient_device, -1, 1023));
  LOCO_RETURN_IF_ERROR(CheckRange("rpc_timeout_ms", o.rpc_timeout_ms, 1, 3600000));
  LOCO_RETURN_IF_ERROR(CheckRange("pull_wait_ms", o.pull_wait_ms, 0, 3600000));
  LOCO_RETURN_IF_ERROR(CheckRange("step_timeout_ms", o.step_timeout_ms, 1, 86400000));
  LOCO_RETURN_IF_ERROR(CheckRange("join_timeout_ms", o.join_timeout_ms, 1, 86400000));
  LOCO_RETURN_IF_ERROR(CheckRange("max_retries", o.max_retries, 0, 1000));
  LOCO_RETURN_IF_ERROR(CheckRange("initial_backoff_ms", o.initial_backoff_ms, 1, 600000));
  LOCO_RETURN_IF_ERROR(
      CheckRange("max_backoff_ms", o.max_backoff_ms, o.initial_backoff_ms, 600000));
  LOCO_RETURN_IF_ERROR(CheckRange("retry_budget_ms", o.retry_budget_ms, 0, 86400000));
  LOCO_RETURN_IF_ERROR(
      CheckRange("coordinator_outage_ms", o.coordinator_outage_ms, 0, 86400000));
  LOCO_RETURN_IF_ERROR(ValidateTransportSecurityOptions(o.security, TransportRole::kClient)
                           .Annotate("WorkerOptions.security"));
  constexpr size_t kMaxGrpcMessage = static_cast<size_t>(std::numeric_limits<int>::max());
  if (o.push_chunk_bytes != 0 &&
      (o.push_chunk_bytes < (size_t{4} << 10) || o.push_chunk_bytes > (size_t{64} << 20))) {
    return InvalidArgument("WorkerOptions.push_chunk_bytes = " +
                           std::to_string(o.push_chunk_bytes) +
                           " is invalid; expected 0 (one unary Push) or a size in [4096, " +
                           std::to_string(size_t{64} << 20) + "] bytes");
  }
  if (o.max_message_bytes < (size_t{1} << 20) || o.max_message_bytes > kMaxGrpcMessage) {
    return InvalidArgument("WorkerOptions.max_message_bytes = " +
                           std::to_string(o.max_message_bytes) +
                           ": expected between 1 MiB and 2 GiB - 1 (gRPC's limit)");
  }
  return Status::Ok();
}

std::chrono::milliseconds InitShardTimeout(const WorkerOptions& o) {
  return std::chrono::milliseconds(std::max(o.rpc_timeout_ms, o.step_timeout_ms));
}

}  // namespace loco
