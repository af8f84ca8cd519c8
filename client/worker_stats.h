// What a Worker reports about one step (StepResult) and about its whole life
// (TrafficStats). Wire bytes are serialized payload bytes (data + scales);
// fp32 bytes are what the same elements would cost as raw fp32 (4 per
// element), so wire / fp32 is the compression ratio.
#pragma once

#include <cstdint>

namespace loco {

struct StepResult {
  uint64_t step = 0;        // the step this call pushed (or tried to push)
  bool resynced = false;    // the push was refused or shards disagreed: the
                            // gradient was dropped and a full copy pulled
  uint64_t nonfinite = 0;   // non-finite gradient elements, sent as 0
  double error_sq_norm = 0; // Σ ê^2 of the new error states of the shards that
                            // accepted the push (LoCo/EF; 0 otherwise)
  uint64_t push_wire_bytes = 0;
  uint64_t push_fp32_bytes = 0;
  uint64_t pull_wire_bytes = 0;
  uint64_t pull_fp32_bytes = 0;
  // The step's duration and the part of it that ran the gradient
  // computation (with the pushes it overlapped); the rest is what the step
  // waited for afterwards: its last pushes, the other workers, the servers'
  // step and the pulls. Set when the step returns OK.
  double seconds = 0;
  double compute_seconds = 0;
};

// Cumulative since Join. Push counters count accepted gradient pushes only
// (not InitShard); pull counters count every pull, including the initial
// copy and resynchronisations.
struct TrafficStats {
  uint64_t push_wire_bytes = 0;
  uint64_t push_fp32_bytes = 0;
  uint64_t pull_wire_bytes = 0;
  uint64_t pull_fp32_bytes = 0;
  uint64_t steps = 0;       // Step calls that completed (resynced or not)
  uint64_t resyncs = 0;
  uint64_t nonfinite = 0;
};

}  // namespace loco
