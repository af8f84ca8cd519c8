// Bytes each benchmarked kernel moves between memory and the processor, by
// the kernel's contract (every input read once, every output written once),
// so that bytes/second can be set against a memory copy of the same bytes.
// Write-allocate traffic (reading a line before overwriting it) is not
// counted, for the kernels or for the copy.
#pragma once

#include <cstddef>

namespace loco::bench {

// LoCo compress, LoCo mode with the int8 error state: reads g (4 B), the
// error code (1 B) and one error scale per block; writes the packed payload
// codes (bits/8 B), one payload scale per block, the new error code (1 B) and
// one error scale per block.
size_t LocoCompressBytes(size_t n, int bits, int block_size);

// Decode-and-accumulate of `workers` block-quantized payloads: reads every
// payload's codes and scales, writes out (4 B per element).
size_t DecodeAccumulateBytes(size_t n, int workers, int bits, int block_size);

// AdamW: reads params, m, v, grad (16 B); writes params, m, v (12 B).
size_t AdamWBytes(size_t n);

// The return delta against a replica (cpu::QuantizeDeltaAdd): reads the
// master and the replica (8 B); writes the replica (4 B), the packed codes
// (bits/8 B) and one scale per block.
size_t ReturnDeltaBytes(size_t n, int bits, int block_size);

}  // namespace loco::bench
