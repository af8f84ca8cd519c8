// Calibration: the cost model's machine constants, fitted from measured
// runs (plan/calibration_fit.h), and their file: `key=value` lines, numbers
// printed with %.17g so that a file read back gives the same doubles,
// `#` comments, every key required and no key unknown.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace loco::plan {

struct Calibration {
  // Worker: forward and backward per parameter per sample, and the work
  // per parameter that does not grow with the batch (compression, the
  // returned delta's decode and apply, passes over the parameters).
  double worker_s_per_param_sample = 0;
  double worker_s_per_element = 0;
  // Server, per shard element: decoding one worker's payload into the
  // average, and the rest of its step (AdamW, encoding the return).
  double server_s_per_element_payload = 0;
  double server_s_per_element = 0;
  // CPU per byte at each end of a link (socket copies, the network stack,
  // gRPC and protobuf), and per message (each push and each pull of a shard).
  double cpu_s_per_byte = 0;
  double cpu_s_per_message = 0;
  // A fixed cost per step: round trips, the coordinator, waking threads.
  double step_overhead_s = 0;
  // Payload bytes per second over the link's rate, in (0, 1].
  double link_efficiency = 1;
  // A server's resident memory: a fixed part, bytes per shard element
  // (parameters, moments, the average), more per element with the delta
  // return (its error state), and the share of the step's pushes held at once.
  double server_fixed_bytes = 0;
  double server_bytes_per_element = 16;
  double server_delta_bytes_per_element = 0;
  double server_push_held_fraction = 1;
  // A server's CPU per step (Prediction::server_cpu_s), a linear model of
  // its own, fitted to the runs that measured it (server_cpu_runs of
  // them). Per byte in and out; per stream second, each of the server's
  // streams' bytes over its worker's link rate (what the threads spend
  // while data trickles in and out: wake-ups and small reads, more per
  // byte on a slower link); per byte again for the bytes that travel as
  // plain fp32 (measured: a fp32 push or pull costs the server about twice
  // a codec's CPU per byte, parsed, copied and summed whole, where a
  // codec's decode is counted per element); per message (each push and each pull); per
  // shard element, for each payload decoded and for the rest of the update.
  // server_cpu_runs = 0: no run measured it, and the constants are the
  // step model's (cpu_s_per_byte, cpu_s_per_message, server_s_per_element*;
  // none per stream second).
  double server_cpu_s_per_byte = 0;
  double server_cpu_s_per_fp32_byte = 0;
  double server_cpu_s_per_stream_s = 0;
  double server_cpu_s_per_message = 0;
  double server_cpu_s_per_element_payload = 0;
  double server_cpu_s_per_element = 0;
  uint64_t server_cpu_runs = 0;
  double server_cpu_rms_relative_error = 0;
  // Where the constants came from, and how well they fit there.
  std::string source;
  uint64_t runs = 0;
  double rms_relative_error = 0;
};

// The file's text. Deterministic: same calibration, same bytes.
std::string FormatCalibration(const Calibration& calibration);

// Parses FormatCalibration's text. InvalidArgument naming the line for a
// malformed, unknown, repeated or missing key, or a number that is not
// finite, negative, or (link_efficiency) outside (0, 1]. The server_cpu_*
// keys are all present or all absent (a file from before the server CPU
// model: read with server_cpu_runs = 0, the step model's stand-in).
StatusOr<Calibration> ParseCalibration(const std::string& text);

// File wrappers: NotFound / Unavailable name the path; a parse error is
// prefixed with it.
StatusOr<Calibration> ReadCalibrationFile(const std::string& path);
Status WriteCalibrationFile(const std::string& path, const Calibration& calibration);

}  // namespace loco::plan
