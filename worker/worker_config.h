// WorkerConfig: every setting of the loco-worker binary, with its flag,
// environment variable and default (DefineWorkerFlags), so that the
// configuration lives in one place and the README's table is generated from
// it (scripts/config-table.sh).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/status.h"
#include "common/transport_security_options.h"

namespace loco {

struct WorkerConfig {
  std::string coordinator, name, codec, data_dir, hidden, eval, metrics_host;
  std::string model = "mlp", corpus_dir, trace_dir;
  int64_t lm_layers = 2, lm_channels = 128, lm_heads = 4, lm_context = 64;
  int64_t eval_every = 0, eval_windows = 256, wait_for_workers = 0;
  int64_t join_at_step = 0, join_wait_timeout_ms = 0;
  int64_t bits = 4, block_size = 128, reset_period = 0, error_bits = 8, seed = 0;
  int64_t global_batch = 256, epochs = 2, steps = 0, blas_threads = 1, report_every = 1;
  int64_t rpc_timeout_ms = 0, pull_wait_ms = 0, step_timeout_ms = 0, join_timeout_ms = 0;
  int64_t coordinator_outage_ms = 0;
  int64_t max_retries = 0, metrics_port = 0, local_devices = 1, push_chunk_bytes = 0;
  std::string device = "cpu";
  std::string local_group = "auto";
  std::string cpu_products = "auto";
  std::string ready_granularity = "panel";
  double beta = 0.5;
  bool stochastic_rounding = false, print_markdown = false, report_params_crc = false;
  bool check_flags = false;  // --check-flags: validate, then exit
  bool overlap_backward = true;
  bool push_parts = true;
  bool pull_parts = true;
  bool ordered_pushes = true;
  loco::TransportSecurityOptions security;
};

// Registers every flag on `f`, writing into *c (which must outlive `f`).
void DefineWorkerFlags(FlagSet& f, WorkerConfig* c);

// Parses --hidden ("1024,1024") into layer sizes, each in [1, 2^20] and
// written in decimal digits. A refusal names the setting as `named` says
// (FlagSet::Named: "$LOCO_HIDDEN (for --hidden)" for a value from the
// environment).
[[nodiscard]] Status ParseHiddenLayers(const std::string& s, std::vector<size_t>* out,
                                       const std::string& named = "--hidden");

// The parameters (weights and biases) of the MLP that loco-worker builds on
// Fashion-MNIST (784 inputs, 10 classes) with `hidden` between them;
// UINT64_MAX if the count does not fit 64 bits.
uint64_t MlpParameterCount(const std::vector<size_t>& hidden);

// What loco-worker keeps per parameter of its model at least: the value,
// the initial value and the gradient, each a 32-bit float (the error state,
// the activations and the encoded pushes come on top).
inline constexpr uint64_t kWorkerBytesPerParameter = 12;

// Refuses an MLP (`hidden` as parsed from --hidden=`flag_value`) whose
// parameters cannot fit `memory_bytes` at kWorkerBytesPerParameter each,
// which would otherwise end the worker when it allocates them
// (std::bad_alloc): InvalidArgument naming --hidden (as `named`), the
// parameter count and the limit. A `memory_bytes` of 0 (unknown) checks
// nothing.
[[nodiscard]] Status CheckMlpSize(const std::string& flag_value, const std::vector<size_t>& hidden,
                                  uint64_t memory_bytes, const std::string& named = "--hidden");

// This machine's physical memory in bytes; 0 when the system does not say.
uint64_t PhysicalMemoryBytes();

// The combinations of settings no single flag's range can refuse: --bits and
// --error-bits outside their sets, --lm-channels not a multiple of
// --lm-heads, --join-at-step with --wait-for-workers or at or past --steps,
// --local-group nccl without CUDA devices or an NCCL build, --device cuda
// with another model or fewer CUDA devices than --local-devices,
// --block-size not a multiple of 32, --push-chunk-bytes below 4096 but not
// 0. Returns InvalidArgument naming the flag (FlagSet::Named: a value from
// the environment by its variable) and what would be right, for the first of
// them in that order. `c` holds values within their flags' ranges, as
// `flags`' Parse left them (--lm-heads >= 1). Reads the CUDA device count,
// nothing else. --join-at-step against the end of an --epochs run needs the
// data set's size: loco-worker checks that once it has loaded it.
[[nodiscard]] Status CheckWorkerConfig(const WorkerConfig& c, const FlagSet& flags);

// The flags that `c`'s codec, model, device or step would ignore: the block
// codecs' (--bits, --stochastic-rounding, and --block-size with one local
// device) with --codec fp32 or bf16; the error state's (--error-bits) with
// those or naive; LoCo's own (--beta, --reset-period) with any codec but
// loco; the char LM's (--corpus-dir, --lm-*, --eval-windows) with --model
// mlp; the MLP's
// (--hidden, --data-dir, --cpu-products, --ready-granularity) with --model
// charlm; --cpu-products and --ready-granularity with --device cuda; and
// --ready-granularity where no overlapped step reports readiness
// (--overlap-backward=false, --local-devices > 1). One typed on the command
// line is refused: InvalidArgument naming it, why it has no effect and what
// to do, for the first in registration order. One read from the environment,
// which several jobs may share, is not an error: a line saying so is
// appended to *notes for the caller to log. `flags` is the FlagSet that
// parsed `c` (FlagSet::Source).
[[nodiscard]] Status CheckFlagsApply(const WorkerConfig& c, const FlagSet& flags,
                                     std::vector<std::string>* notes);

}  // namespace loco
