// WorkerMetrics: the Prometheus metrics the Worker library keeps about its
// own traffic and steps. Per-worker figures are told apart by the scrape
// target (each worker process serves its own /metrics), so no worker id
// label; shard ids are bounded by the cluster's shard count.
//
//   loco_worker_wire_bytes_total{shard,direction}  payload bytes (data +
//       scales) of accepted pushes (direction="push") and of every pull
//       (direction="pull"); equal to TrafficStats summed over shards
//   loco_worker_fp32_bytes_total{shard,direction}  4 x elements of the same
//   loco_worker_rpc_duration_seconds{direction}    one shard's push or pull,
//       retries and waiting for the step included
//   loco_worker_step_duration_seconds              one Worker::Step
//   loco_worker_step_phase_seconds{phase}          the same step in two parts:
//       "compute" (the gradient computation Step ran, with the pushes it
//       overlapped) and "exposed_communication" (what the step still waited
//       for once the gradient was computed: the last pushes, the other
//       workers' pushes, the servers' step and the pulls)
//   loco_worker_codec_seconds_total{op}            seconds spent encoding the
//       gradient's shards (op="encode": the compression kernel, the LoCo
//       error state) and decoding and applying pulled answers
//       (op="decode"), and
//   loco_worker_codec_fp32_bytes_total{op}         4 x the elements they
//       handled: bytes / seconds is the codec's throughput in production,
//       the figure bench/kernels measures alone
//   loco_worker_steps_total, loco_worker_resyncs_total
//   loco_worker_step                               version the worker holds
//   loco_worker_world_size
//   loco_worker_error_state_norm                   ||ê|| over the shards that
//       accepted the last push (LoCo/EF; 0 for the other codecs)
//   loco_worker_gradient_norm                      ||g|| of the last step's
//       gradient (finite elements)
//   loco_worker_nonfinite_gradient_elements_total  sent as 0
//
// Thread-safe (prometheus-cpp metrics are atomic; Family::Add locks).
#pragma once

#include <cstdint>
#include <span>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "client/worker_stats.h"

namespace loco {

// Σ g² over the finite elements of `g`, in double (the gradient norm the
// metrics report; non-finite elements are counted elsewhere).
double FiniteSquaredNorm(std::span<const float> g);

class WorkerMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit WorkerMetrics(prometheus::Registry& registry);

  void OnPush(uint32_t shard, uint64_t wire_bytes, uint64_t fp32_bytes, double seconds);
  void OnPull(uint32_t shard, uint64_t wire_bytes, uint64_t fp32_bytes, double seconds);
  // A Step that returned OK: grad_sq_norm is the squared norm of the
  // gradient it was given (FiniteSquaredNorm for a host gradient); its
  // durations are result.seconds and result.compute_seconds.
  void OnStep(double grad_sq_norm, const StepResult& result, uint64_t step_now,
              uint32_t world_size);
  // One encode of `elements` gradient elements (a whole shard or a part of
  // one) that took `seconds`, and one decode-and-apply of a pulled answer.
  void OnEncode(uint64_t elements, double seconds);
  void OnDecode(uint64_t elements, double seconds);
  // The worker now holds version `step` (after InitParameters).
  void OnVersion(uint64_t step) { step_.Set(static_cast<double>(step)); }
  // The error state of every shard's encoder, in bytes (after Join).
  void OnErrorStateBytes(uint64_t bytes) { error_state_bytes_.Set(static_cast<double>(bytes)); }

 private:
  prometheus::Family<prometheus::Counter>& wire_bytes_;
  prometheus::Family<prometheus::Counter>& fp32_bytes_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  prometheus::Histogram& push_duration_;
  prometheus::Histogram& pull_duration_;
  prometheus::Histogram& step_duration_;
  prometheus::Family<prometheus::Histogram>& step_phase_;
  prometheus::Histogram& compute_phase_;
  prometheus::Histogram& exposed_phase_;
  prometheus::Family<prometheus::Counter>& codec_seconds_;
  prometheus::Family<prometheus::Counter>& codec_bytes_;
  prometheus::Counter& encode_seconds_;
  prometheus::Counter& decode_seconds_;
  prometheus::Counter& encode_bytes_;
  prometheus::Counter& decode_bytes_;
  prometheus::Counter& steps_;
  prometheus::Counter& resyncs_;
  prometheus::Counter& nonfinite_;
  prometheus::Gauge& step_;
  prometheus::Gauge& world_size_;
  prometheus::Gauge& error_norm_;
  prometheus::Gauge& gradient_norm_;
  prometheus::Gauge& error_state_bytes_;
};

}  // namespace loco
