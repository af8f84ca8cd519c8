#include "bytes_moved.h"

#include "kernels/quantize.h"

namespace loco::bench {

size_t LocoCompressBytes(size_t n, int bits, int block_size) {
  const size_t scales = NumBlocks(n, block_size) * sizeof(float);
  const size_t reads = n * sizeof(float) + n + scales;
  const size_t writes = PackedBytes(n, bits) + scales + n + scales;
  return reads + writes;
}

size_t DecodeAccumulateBytes(size_t n, int workers, int bits, int block_size) {
  const size_t payload = PackedBytes(n, bits) + NumBlocks(n, block_size) * sizeof(float);
  return static_cast<size_t>(workers) * payload + n * sizeof(float);
}

size_t AdamWBytes(size_t n) { return 7 * n * sizeof(float); }

size_t ReturnDeltaBytes(size_t n, int bits, int block_size) {
  return 3 * n * sizeof(float) + PackedBytes(n, bits) + NumBlocks(n, block_size) * sizeof(float);
}

}  // namespace loco::bench
