#include "client/worker_metrics.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "metrics/metric_conventions.h"

namespace loco {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

WorkerMetrics::WorkerMetrics(prometheus::Registry& r)
    : wire_bytes_(BuildCounter()
                      .Name("loco_worker_wire_bytes_total")
                      .Help("Payload bytes (data + scales) of accepted pushes and of pulls")
                      .Register(r)),
      fp32_bytes_(BuildCounter()
                      .Name("loco_worker_fp32_bytes_total")
                      .Help("Bytes the same payloads would take as fp32 (4 per element)")
                      .Register(r)),
      rpc_duration_(BuildHistogram()
                        .Name("loco_worker_rpc_duration_seconds")
                        .Help("One shard's push or pull as the worker sees it, retries included")
                        .Register(r)),
      push_duration_(rpc_duration_.Add({{"direction", "push"}}, DurationBucketsSeconds())),
      pull_duration_(rpc_duration_.Add({{"direction", "pull"}}, DurationBucketsSeconds())),
      step_duration_(BuildHistogram()
                         .Name("loco_worker_step_duration_seconds")
                         .Help("One synchronous step: compress, push, wait, pull")
                         .Register(r)
                         .Add({}, DurationBucketsSeconds())),
      step_phase_(BuildHistogram()
                      .Name("loco_worker_step_phase_seconds")
                      .Help("One step in two parts: the gradient computation, and what "
                            "the step then waited for (pushes, the other workers, the "
                            "servers' step, pulls)")
                      .Register(r)),
      compute_phase_(step_phase_.Add({{"phase", "compute"}}, DurationBucketsSeconds())),
      exposed_phase_(
          step_phase_.Add({{"phase", "exposed_communication"}}, DurationBucketsSeconds())),
      codec_seconds_(BuildCounter()
                         .Name("loco_worker_codec_seconds_total")
                         .Help("Seconds spent encoding gradient shards (op=encode) and "
                               "decoding and applying pulled answers (op=decode)")
                         .Register(r)),
      codec_bytes_(BuildCounter()
                       .Name("loco_worker_codec_fp32_bytes_total")
                       .Help("4 x the elements encoded (op=encode) and decoded (op=decode); "
                             "over loco_worker_codec_seconds_total, the codec's throughput")
                       .Register(r)),
      encode_seconds_(codec_seconds_.Add({{"op", "encode"}})),
      decode_seconds_(codec_seconds_.Add({{"op", "decode"}})),
      encode_bytes_(codec_bytes_.Add({{"op", "encode"}})),
      decode_bytes_(codec_bytes_.Add({{"op", "decode"}})),
      steps_(BuildCounter()
                 .Name("loco_worker_steps_total")
                 .Help("Steps completed by this worker (resynchronised or not)")
                 .Register(r)
                 .Add({})),
      resyncs_(BuildCounter()
                   .Name("loco_worker_resyncs_total")
                   .Help("Steps whose gradient was dropped and a full copy pulled")
                   .Register(r)
                   .Add({})),
      nonfinite_(BuildCounter()
                     .Name("loco_worker_nonfinite_gradient_elements_total")
                     .Help("Non-finite gradient elements, sent as 0")
                     .Register(r)
                     .Add({})),
      step_(BuildGauge()
                .Name("loco_worker_step")
                .Help("Version of the parameters this worker holds")
                .Register(r)
                .Add({})),
      world_size_(BuildGauge()
                      .Name("loco_worker_world_size")
                      .Help("Workers in the cluster as last told by the coordinator")
                      .Register(r)
                      .Add({})),
      error_norm_(BuildGauge()
                      .Name("loco_worker_error_state_norm")
                      .Help("L2 norm of the LoCo/EF error state after the last step")
                      .Register(r)
                      .Add({})),
      gradient_norm_(BuildGauge()
                         .Name("loco_worker_gradient_norm")
                         .Help("L2 norm of the last step's gradient (finite elements)")
                         .Register(r)
                         .Add({})),
      error_state_bytes_(BuildGauge()
                             .Name("loco_worker_error_state_bytes")
                             .Help("Bytes of LoCo/EF error state this worker holds, all shards")
                             .Register(r)
                             .Add({})) {}

void WorkerMetrics::OnPush(uint32_t shard, uint64_t wire, uint64_t fp32, double seconds) {
  const std::string id = std::to_string(shard);
  wire_bytes_.Add({{"shard", id}, {"direction", "push"}}).Increment(static_cast<double>(wire));
  fp32_bytes_.Add({{"shard", id}, {"direction", "push"}}).Increment(static_cast<double>(fp32));
  push_duration_.Observe(seconds);
}

void WorkerMetrics::OnPull(uint32_t shard, uint64_t wire, uint64_t fp32, double seconds) {
  const std::string id = std::to_string(shard);
  wire_bytes_.Add({{"shard", id}, {"direction", "pull"}}).Increment(static_cast<double>(wire));
  fp32_bytes_.Add({{"shard", id}, {"direction", "pull"}}).Increment(static_cast<double>(fp32));
  pull_duration_.Observe(seconds);
}

void WorkerMetrics::OnEncode(uint64_t elements, double seconds) {
  encode_seconds_.Increment(seconds);
  encode_bytes_.Increment(4.0 * static_cast<double>(elements));
}

void WorkerMetrics::OnDecode(uint64_t elements, double seconds) {
  decode_seconds_.Increment(seconds);
  decode_bytes_.Increment(4.0 * static_cast<double>(elements));
}

double FiniteSquaredNorm(std::span<const float> g) {
  // Eight independent partial sums: one running sum is a chain of dependent
  // additions the compiler may not reorder, several times slower on a model
  // of millions of elements. No finiteness test in the loop (it made the
  // pass 4x slower): a finite float squared cannot overflow a double, nor
  // can millions of such squares, so the plain sum is non-finite exactly
  // when an element is, and only then is the careful pass needed.
  constexpr size_t kLanes = 8;
  const size_t n = g.size(), whole = n / kLanes * kLanes;
  double lanes[kLanes] = {};
  for (size_t i = 0; i < whole; i += kLanes) {
    for (size_t k = 0; k < kLanes; ++k) {
      const double x = g[i + k];
      lanes[k] += x * x;
    }
  }
  double sq = 0;
  for (size_t i = whole; i < n; ++i) sq += static_cast<double>(g[i]) * g[i];
  for (double l : lanes) sq += l;
  if (std::isfinite(sq)) return sq;
  sq = 0;
  for (float x : g) {
    if (std::isfinite(x)) sq += static_cast<double>(x) * x;
  }
  return sq;
}

void WorkerMetrics::OnStep(double grad_sq_norm, const StepResult& result, uint64_t step_now,
                           uint32_t world_size) {
  gradient_norm_.Set(std::sqrt(grad_sq_norm));
  error_norm_.Set(std::sqrt(result.error_sq_norm));
  step_duration_.Observe(result.seconds);
  compute_phase_.Observe(result.compute_seconds);
  exposed_phase_.Observe(std::max(0.0, result.seconds - result.compute_seconds));
  steps_.Increment();
  if (result.resynced) resyncs_.Increment();
  nonfinite_.Increment(static_cast<double>(result.nonfinite));
  step_.Set(static_cast<double>(step_now));
  world_size_.Set(static_cast<double>(world_size));
}

}  // namespace loco
