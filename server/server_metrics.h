// ServerMetrics: the Prometheus metrics of one parameter-server shard, all
// labelled shard="<id>" (one value per process; bounded by the shard count).
//
//   loco_server_wire_bytes_total{shard,direction}   payload bytes (data +
//       scales) of accepted gradient pushes (direction="push", duplicates not
//       counted) and of served pulls (direction="pull")
//   loco_server_fp32_bytes_total{shard,direction}   4 x elements of the same
//       payloads: saving = 1 - wire / fp32
//   loco_server_pushes_total, loco_server_pulls_total{shard}
//   loco_server_push_withdrawals_total{shard}       workers that withdrew from
//       a step after a refused push (PushRequest.withdraw): the step went on
//       without them
//   loco_server_push_chunks_total{shard}            PushStream chunks received,
//       counted as they arrive (a push sent in parts arrives while its
//       worker still computes the rest)
//   loco_server_pull_parts_total{shard}             parts of step deltas sent
//       to PullStreams that waited for the step, each as soon as the step
//       had made it final
//   loco_server_step_duration_seconds{shard}        step opened -> applied
//   loco_server_straggler_wait_seconds{shard}       first push -> step applied
//   loco_server_decode_aggregate_seconds{shard}     mean of the payloads
//   loco_server_optimizer_seconds{shard}            AdamW on the shard, and
//       with the delta return path the delta's encoding, done piece by piece
//       beside it
//   loco_server_step{shard}                         current version
//   loco_server_steps_completed_total{shard}
//   loco_server_steps_short_of_participants_total{shard}
//   loco_server_step_participants{shard}            payloads in the last step
//   loco_server_requests_rejected_total{shard,rpc,reason}  reason = gRPC code
//   loco_server_nonfinite_payloads_total{shard}     pushes refused for
//       non-finite scales or values
//   loco_server_checkpoints_total{shard,result}, loco_server_checkpoint_duration_seconds{shard}
//
// Thread-safe: prometheus-cpp metrics are atomic; the step timestamps have
// their own mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/status.h"
#include "proto/loco.pb.h"

namespace loco {

class ServerMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  ServerMetrics(prometheus::Registry& registry, uint32_t shard_id);

  // ---- gRPC edge
  // One chunk of a PushStream arrived (before the push is checked).
  void OnPushChunk() { push_chunks_.Increment(); }
  void OnPullParts(uint64_t parts) { pull_parts_.Increment(static_cast<double>(parts)); }
  // A push that entered the open step (not a duplicate), of `wire_bytes`
  // (WireBytes) for `length` elements.
  void OnPushAccepted(uint64_t wire_bytes, uint64_t length);
  // A worker withdrew from the open step (not a repeated withdrawal).
  void OnPushWithdrawn() { withdrawals_.Increment(); }
  // A pull answered with `wire_bytes` of payload for `length` elements.
  void OnPullServed(uint64_t wire_bytes, uint64_t length);
  // A request answered with a non-OK status. A push refused with
  // INVALID_ARGUMENT whose payload holds non-finite numbers also counts as a
  // non-finite payload.
  void OnRejected(const std::string& rpc, const Status& status, const v1::Payload* payload);

  // ---- step lifecycle
  // The shard was (re)initialised, or restored, at `version`.
  void OnStepOpened(uint64_t version);
  // A push entered step `step`; the first one starts the straggler clock.
  void OnPushAdded(size_t pushes_held);
  // Step completed: `received` payloads out of `expected` participants.
  void OnStepApplied(uint64_t new_version, size_t received, size_t expected,
                     double decode_aggregate_s, double optimizer_s);
  // A checkpoint was written (ok) or failed, taking `seconds`.
  void OnCheckpoint(bool ok, double seconds);

  // Payload bytes on the wire: data plus scales.
  static uint64_t WireBytes(const v1::Payload& p) { return p.data().size() + p.scales().size(); }
  // True when a scale or an fp32 or bf16 value is NaN or infinite.
  static bool HasNonFinite(const v1::Payload& p);

 private:
  using Clock = std::chrono::steady_clock;

  const std::string shard_;
  prometheus::Family<prometheus::Counter>& wire_bytes_;
  prometheus::Family<prometheus::Counter>& fp32_bytes_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Counter>& checkpoints_;
  prometheus::Counter& push_wire_;
  prometheus::Counter& push_fp32_;
  prometheus::Counter& pull_wire_;
  prometheus::Counter& pull_fp32_;
  prometheus::Counter& pushes_;
  prometheus::Counter& withdrawals_;
  prometheus::Counter& pulls_;
  prometheus::Counter& push_chunks_;
  prometheus::Counter& pull_parts_;
  prometheus::Counter& steps_completed_;
  prometheus::Counter& steps_short_;
  prometheus::Counter& nonfinite_;
  prometheus::Counter& checkpoints_ok_;
  prometheus::Counter& checkpoints_failed_;
  prometheus::Gauge& step_;
  prometheus::Gauge& participants_;
  prometheus::Histogram& step_duration_;
  prometheus::Histogram& straggler_wait_;
  prometheus::Histogram& decode_aggregate_;
  prometheus::Histogram& optimizer_;
  prometheus::Histogram& checkpoint_duration_;

  std::mutex mu_;
  std::optional<Clock::time_point> opened_;      // when the open step opened
  std::optional<Clock::time_point> first_push_;  // first push of the open step
};

}  // namespace loco
