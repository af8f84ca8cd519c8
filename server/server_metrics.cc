#include "server/server_metrics.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "metrics/metric_conventions.h"

namespace loco {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

bool AnyNonFinite(const std::string& bytes) {
  const size_t n = bytes.size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, bytes.data() + i * sizeof(float), sizeof(float));
    if (!std::isfinite(x)) return true;
  }
  return false;
}

// bf16 keeps fp32's exponent: all ones is an infinity or a NaN.
bool AnyNonFiniteBf16(const std::string& bytes) {
  const size_t n = bytes.size() / sizeof(uint16_t);
  for (size_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, bytes.data() + i * sizeof(uint16_t), sizeof(uint16_t));
    if ((b & 0x7F80u) == 0x7F80u) return true;
  }
  return false;
}

}  // namespace

ServerMetrics::ServerMetrics(prometheus::Registry& r, uint32_t shard_id)
    : shard_(std::to_string(shard_id)),
      wire_bytes_(BuildCounter()
                      .Name("loco_server_wire_bytes_total")
                      .Help("Payload bytes (data + scales) of accepted pushes and served pulls")
                      .Register(r)),
      fp32_bytes_(BuildCounter()
                      .Name("loco_server_fp32_bytes_total")
                      .Help("Bytes the same payloads would take as fp32 (4 per element)")
                      .Register(r)),
      rejected_(BuildCounter()
                    .Name("loco_server_requests_rejected_total")
                    .Help("Requests answered with an error, by RPC and gRPC status code")
                    .Register(r)),
      checkpoints_(BuildCounter()
                       .Name("loco_server_checkpoints_total")
                       .Help("Checkpoints written (result=ok) or failed (result=error)")
                       .Register(r)),
      push_wire_(wire_bytes_.Add({{"shard", shard_}, {"direction", "push"}})),
      push_fp32_(fp32_bytes_.Add({{"shard", shard_}, {"direction", "push"}})),
      pull_wire_(wire_bytes_.Add({{"shard", shard_}, {"direction", "pull"}})),
      pull_fp32_(fp32_bytes_.Add({{"shard", shard_}, {"direction", "pull"}})),
      pushes_(BuildCounter()
                  .Name("loco_server_pushes_total")
                  .Help("Gradient pushes accepted into a step")
                  .Register(r)
                  .Add({{"shard", shard_}})),
      withdrawals_(BuildCounter()
                       .Name("loco_server_push_withdrawals_total")
                       .Help("Workers that withdrew from a step after a refused push: the "
                             "step went on without them")
                       .Register(r)
                       .Add({{"shard", shard_}})),
      pulls_(BuildCounter()
                 .Name("loco_server_pulls_total")
                 .Help("Pulls answered with parameters")
                 .Register(r)
                 .Add({{"shard", shard_}})),
      push_chunks_(BuildCounter()
                       .Name("loco_server_push_chunks_total")
                       .Help("PushStream chunks received, counted as they arrive")
                       .Register(r)
                       .Add({{"shard", shard_}})),
      pull_parts_(BuildCounter()
                      .Name("loco_server_pull_parts_total")
                      .Help("Parts of step deltas sent to PullStreams that waited for the "
                            "step, each as soon as the step had made it final")
                      .Register(r)
                      .Add({{"shard", shard_}})),
      steps_completed_(BuildCounter()
                           .Name("loco_server_steps_completed_total")
                           .Help("Optimizer steps applied")
                           .Register(r)
                           .Add({{"shard", shard_}})),
      steps_short_(BuildCounter()
                       .Name("loco_server_steps_short_of_participants_total")
                       .Help("Steps applied with fewer payloads than participants (some departed)")
                       .Register(r)
                       .Add({{"shard", shard_}})),
      nonfinite_(BuildCounter()
                     .Name("loco_server_nonfinite_payloads_total")
                     .Help("Pushes refused because their scales or values were not finite")
                     .Register(r)
                     .Add({{"shard", shard_}})),
      checkpoints_ok_(checkpoints_.Add({{"shard", shard_}, {"result", "ok"}})),
      checkpoints_failed_(checkpoints_.Add({{"shard", shard_}, {"result", "error"}})),
      step_(BuildGauge()
                .Name("loco_server_step")
                .Help("Current version of the shard (optimizer steps applied)")
                .Register(r)
                .Add({{"shard", shard_}})),
      participants_(BuildGauge()
                        .Name("loco_server_step_participants")
                        .Help("Payloads averaged in the last applied step")
                        .Register(r)
                        .Add({{"shard", shard_}})),
      step_duration_(BuildHistogram()
                         .Name("loco_server_step_duration_seconds")
                         .Help("Time from a step's opening to its application")
                         .Register(r)
                         .Add({{"shard", shard_}}, DurationBucketsSeconds())),
      straggler_wait_(BuildHistogram()
                          .Name("loco_server_straggler_wait_seconds")
                          .Help("Time from a step's first push to its completion")
                          .Register(r)
                          .Add({{"shard", shard_}}, DurationBucketsSeconds())),
      decode_aggregate_(BuildHistogram()
                            .Name("loco_server_decode_aggregate_seconds")
                            .Help("Time to decode and average a step's payloads")
                            .Register(r)
                            .Add({{"shard", shard_}}, DurationBucketsSeconds())),
      optimizer_(
          BuildHistogram()
              .Name("loco_server_optimizer_seconds")
              .Help("Time of the AdamW update of the shard (with the delta return path, and of "
                    "the delta's encoding, done piece by piece beside it)")
              .Register(r)
              .Add({{"shard", shard_}}, DurationBucketsSeconds())),
      checkpoint_duration_(BuildHistogram()
                               .Name("loco_server_checkpoint_duration_seconds")
                               .Help("Time to write one checkpoint")
                               .Register(r)
                               .Add({{"shard", shard_}}, DurationBucketsSeconds())) {}

bool ServerMetrics::HasNonFinite(const v1::Payload& p) {
  if (AnyNonFinite(p.scales())) return true;
  if (p.codec() == v1::CODEC_BF16) return AnyNonFiniteBf16(p.data());
  return p.codec() == v1::CODEC_FP32 && AnyNonFinite(p.data());
}

void ServerMetrics::OnPushAccepted(uint64_t wire_bytes, uint64_t length) {
  pushes_.Increment();
  push_wire_.Increment(static_cast<double>(wire_bytes));
  push_fp32_.Increment(4.0 * static_cast<double>(length));
}

void ServerMetrics::OnPullServed(uint64_t wire_bytes, uint64_t length) {
  pulls_.Increment();
  pull_wire_.Increment(static_cast<double>(wire_bytes));
  pull_fp32_.Increment(4.0 * static_cast<double>(length));
}

void ServerMetrics::OnRejected(const std::string& rpc, const Status& status,
                               const v1::Payload* payload) {
  if (status.ok()) return;
  std::string reason = ReasonLabel(status.code());
  if (status.code() == StatusCode::kInvalidArgument && payload && HasNonFinite(*payload)) {
    nonfinite_.Increment();
    reason = "nonfinite";
  }
  rejected_.Add({{"shard", shard_}, {"rpc", rpc}, {"reason", reason}}).Increment();
}

void ServerMetrics::OnStepOpened(uint64_t version) {
  step_.Set(static_cast<double>(version));
  std::lock_guard<std::mutex> lock(mu_);
  opened_ = Clock::now();
  first_push_.reset();
}

void ServerMetrics::OnPushAdded(size_t pushes_held) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pushes_held == 1 || !first_push_) first_push_ = Clock::now();
}

void ServerMetrics::OnStepApplied(uint64_t new_version, size_t received, size_t expected,
                                  double decode_aggregate_s, double optimizer_s) {
  const auto now = Clock::now();
  steps_completed_.Increment();
  if (received < expected) steps_short_.Increment();
  participants_.Set(static_cast<double>(received));
  step_.Set(static_cast<double>(new_version));
  decode_aggregate_.Observe(decode_aggregate_s);
  optimizer_.Observe(optimizer_s);
  std::lock_guard<std::mutex> lock(mu_);
  if (opened_) step_duration_.Observe(std::chrono::duration<double>(now - *opened_).count());
  if (first_push_) {
    straggler_wait_.Observe(std::chrono::duration<double>(now - *first_push_).count());
  }
  opened_ = now;
  first_push_.reset();
}

void ServerMetrics::OnCheckpoint(bool ok, double seconds) {
  (ok ? checkpoints_ok_ : checkpoints_failed_).Increment();
  if (ok) checkpoint_duration_.Observe(seconds);
}

}  // namespace loco
