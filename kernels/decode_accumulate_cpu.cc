// CPU reference of server-side decode-and-accumulate (contract:
// kernels/decode_accumulate.h) and the payload validator shared with CUDA.
//
// Arithmetic: per element, in payload order, acc = D(p_0); acc += D(p_k) in
// fp32; then out = acc * (float)(1.0 / n) (n == 1: out = acc). D of a
// block-quant payload is (float)code * scale; of bf16, the exact widening;
// of fp32, the value itself.
//
// When every payload is block-quant with the same bits, 32 elements at a time
// are decoded and summed in registers (AccumulateBlockQuant); otherwise out
// is processed in tiles of kTile elements that stay in L1 while every
// payload is added into them. Either way out is written to memory once per
// eight payloads.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/avx2_clones.h"
#include "kernels/call_checks.h"
#include "kernels/cpu_features.h"
#include "kernels/decode_accumulate.h"
#include "kernels/decode_accumulate_avx512.h"
#include "kernels/quantize.h"
#include "kernels/quantize_inl.h"

namespace loco {
namespace {

static_assert(std::endian::native == std::endian::little,
              "payload data is little-endian; a big-endian host needs byte swaps here");

// Index of the first element whose bits (under `abs_mask`) are >= `inf`, or n.
template <typename T>
size_t FirstNonFinite(const uint8_t* data, size_t n, T abs_mask, T inf) {
  T any = 0;
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    any |= (v & abs_mask) >= inf ? T{1} : T{0};
  }
  if (any == 0) return n;
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    if ((v & abs_mask) >= inf) return i;
  }
  return n;
}

}  // namespace

std::string FormatPayloadFloat(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  return buf;
}

const char* PayloadCodecName(PayloadCodec c) {
  switch (c) {
    case PayloadCodec::kFp32: return "fp32";
    case PayloadCodec::kBf16: return "bf16";
    case PayloadCodec::kBlockQuant: return "block-quant";
  }
  return "unknown";
}

namespace {

Status SizeMismatch(const PayloadView& p, const char* what, size_t got, size_t want,
                    size_t length) {
  return InvalidArgument(std::string(PayloadCodecName(p.codec)) + " payload: " + what + " " +
                         std::to_string(got) + " != " + std::to_string(want) + " expected for " +
                         std::to_string(length) + " elements");
}

}  // namespace

Status ValidatePayloadShape(const PayloadView& p, size_t length) {
  switch (p.codec) {
    case PayloadCodec::kFp32:
    case PayloadCodec::kBf16: {
      const size_t width = p.codec == PayloadCodec::kFp32 ? 4 : 2;
      if (p.data_bytes != length * width) {
        return SizeMismatch(p, "data_bytes", p.data_bytes, length * width, length);
      }
      if (length > 0 && p.data == nullptr) {
        return InvalidArgument(std::string(PayloadCodecName(p.codec)) + " payload has no data");
      }
      return Status::Ok();
    }
    case PayloadCodec::kBlockQuant: {
      if (Status s = ValidateQuantizeParams(p.bits, p.block_size); !s.ok()) {
        return s.Annotate("block-quant payload");
      }
      const size_t want_bytes = PackedBytes(length, p.bits);
      if (p.data_bytes != want_bytes) {
        return SizeMismatch(p, "data_bytes", p.data_bytes, want_bytes, length);
      }
      const size_t want_scales = NumBlocks(length, p.block_size);
      if (p.num_scales != want_scales) {
        return SizeMismatch(p, "num_scales", p.num_scales, want_scales, length);
      }
      if (length > 0 && (p.data == nullptr || p.scales == nullptr)) {
        return InvalidArgument("block-quant payload has no codes or no scales");
      }
      return Status::Ok();
    }
  }
  return InvalidArgument("payload codec " + std::to_string(static_cast<int>(p.codec)) +
                         " is unknown (use fp32, bf16 or block-quant)");
}

Status ValidatePayload(const PayloadView& p, size_t length) {
  LOCO_RETURN_IF_ERROR(ValidatePayloadShape(p, length));
  if (p.codec == PayloadCodec::kBlockQuant) {
    for (size_t b = 0; b < p.num_scales; ++b) {
      const float s = p.scales[b];
      if (!(std::isfinite(s) && s >= 0.0f)) {
        return InvalidArgument("block-quant payload: scale " + std::to_string(b) + " is " +
                               FormatPayloadFloat(s) + " (scales must be finite and >= 0)");
      }
    }
    return Status::Ok();
  }
  // bf16 data is held to the same rule as fp32 and as scales: a payload
  // never carries NaN or Inf into the average.
  const size_t bad = p.codec == PayloadCodec::kFp32
                         ? FirstNonFinite<uint32_t>(p.data, length, 0x7FFFFFFFu, 0x7F800000u)
                         : FirstNonFinite<uint16_t>(p.data, length, 0x7FFF, 0x7F80);
  if (bad != length) {
    return InvalidArgument(std::string(PayloadCodecName(p.codec)) + " payload element " +
                           std::to_string(bad) + " is not finite (NaN or Inf)");
  }
  return Status::Ok();
}

namespace cpu {
namespace {

// The 8-lane helpers are always inlined into one clone; GCC's note that a
// 32-byte vector changes the call ABI without AVX does not apply. (GCC reports
// it at the end of the file, so it stays off for the rest of the file.)
#pragma GCC diagnostic ignored "-Wpsabi"

using detail::kMaxBlock;
constexpr size_t kTile = 4096;  // a multiple of every block start's byte alignment (8 elements)

// Decodes elements [t0, t0 + len) of `p` into acc (assign when `first`, else add).
LOCO_CPU_INLINE void DecodeRange(const PayloadView& p, size_t t0, size_t len, bool first, float* acc,
                 int8_t* q) {
  switch (p.codec) {
    case PayloadCodec::kFp32: {
      const uint8_t* d = p.data + t0 * 4;
      if (first) {
        std::memcpy(acc, d, len * 4);
      } else {
        for (size_t i = 0; i < len; ++i) {
          float v;
          std::memcpy(&v, d + i * 4, 4);
          acc[i] += v;
        }
      }
      return;
    }
    case PayloadCodec::kBf16: {
      const uint8_t* d = p.data + t0 * 2;
      for (size_t i = 0; i < len; ++i) {
        uint16_t b;
        std::memcpy(&b, d + i * 2, 2);
        const float v = std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
        if (first) {
          acc[i] = v;
        } else {
          acc[i] += v;
        }
      }
      return;
    }
    case PayloadCodec::kBlockQuant: {
      const size_t block = static_cast<size_t>(p.block_size);
      const size_t bits = static_cast<size_t>(p.bits);
      size_t i = t0;
      const size_t end = t0 + len;
      while (i < end) {
        const size_t blk = i / block;
        const size_t seg_end = std::min(end, (blk + 1) * block);
        const size_t seg = seg_end - i;
        // i is a tile start (multiple of kTile) or a block start (multiple of
        // 32), so its codes start on a byte boundary.
        detail::UnpackCodes(p.bits, p.data + i * bits / 8, seg, q);
        if (first) {
          detail::DecodeAssign(q, seg, p.scales[blk], acc + (i - t0));
        } else {
          detail::DecodeAdd(q, seg, p.scales[blk], acc + (i - t0));
        }
        i = seg_end;
      }
      return;
    }
  }
}

// Elements [begin, begin + count) of the mean into out[0, count); begin is a
// multiple of 32, so every tile and block start is on a code byte boundary.
LOCO_CPU_CLONES void AccumulateTiles(const PayloadView* payloads, size_t n, size_t begin,
                                     size_t count, float* out) {
  static_assert(kTile <= kMaxBlock);
  alignas(64) int8_t q[kMaxBlock];
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));
  for (size_t t = 0; t < count; t += kTile) {
    const size_t len = std::min(kTile, count - t);
    float* acc = out + t;
    for (size_t k = 0; k < n; ++k) DecodeRange(payloads[k], begin + t, len, k == 0, acc, q);
    if (n > 1) {
      for (size_t i = 0; i < len; ++i) acc[i] *= inv_n;
    }
  }
}

// Write prefetches of out, this many elements (4 KiB) ahead, in calls of
// at least kOutPrefetchMin elements: out is written, never read (but past
// the first 8 payloads), so the hardware prefetcher does not fetch it, and
// each store waits for its line. One thread, 4 four-bit payloads, on a
// Xeon running the AVX2 instance (bench/README.md): 2^24 elements
// 0.65-0.98 ns per element without them, 0.50-0.52 with; 2^26 0.67-0.98
// and 0.53-0.54. Smaller calls, such as the server's pieces, whose out
// stays in the cache, go without: there a write prefetch was measured 4 %
// slower (8-bit payloads). (The AVX-512 path prefetches the same way:
// kernels/decode_accumulate_avx512.cc.)
constexpr size_t kOutPrefetchAhead = 1024;
constexpr size_t kOutPrefetchMin = size_t{1} << 18;  // 1 MiB of out

// All payloads block-quant with the same `kBits`: per 32 elements, the
// payloads are decoded and summed in registers, in payload order, and out is
// read (only between groups of kGroup payloads) and written once per group.
// The same fp32 operations, in the same order, as AccumulateTiles.
template <int kBits>
LOCO_CPU_INLINE void AccumulateBlockQuant(const PayloadView* payloads, size_t n, size_t begin,
                                          size_t count, float* out) {
  using detail::F8;
  constexpr size_t kGroup = 8;
  constexpr size_t kStep = 32;                     // elements per iteration: 4 vectors
  constexpr size_t kBytes = detail::kLanes * kBits / 8;  // packed bytes of one vector
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));
  const F8 inv_v = detail::SplatF8(inv_n);
  const size_t full = count - count % kStep;
  const bool prefetch_out = count >= kOutPrefetchMin;
  for (size_t k0 = 0; k0 < n; k0 += kGroup) {
    const size_t kn = std::min(kGroup, n - k0);
    const bool scale_at_end = k0 + kn == n && n > 1;
    // Per payload of the group: its current block and the elements left in it
    // (begin is a multiple of kStep, and so is every block size).
    size_t blk[kGroup];
    size_t left[kGroup];
    for (size_t j = 0; j < kn; ++j) {
      const size_t block = static_cast<size_t>(payloads[k0 + j].block_size);
      blk[j] = begin / block;
      left[j] = block - begin % block;
    }
    for (size_t i = 0; i < full; i += kStep) {
      // The two lines of out kOutPrefetchAhead on, for writing; not past
      // the range (whatever lies there may be another thread's).
      if (prefetch_out && i + kOutPrefetchAhead < full) {
        __builtin_prefetch(out + i + kOutPrefetchAhead, 1);
        __builtin_prefetch(out + i + kOutPrefetchAhead + 16, 1);
      }
      F8 acc[4] = {};  // every lane is assigned by payload j == 0 (kn >= 1)
      for (size_t j = 0; j < kn; ++j) {
        const PayloadView& p = payloads[k0 + j];
        const F8 s = detail::SplatF8(p.scales[blk[j]]);
        const uint8_t* d = p.data + (begin + i) * kBits / 8;
        for (size_t v = 0; v < 4; ++v) {
          const F8 x = detail::CodesToF8(detail::UnpackCodes8<kBits>(d + v * kBytes)) * s;
          if (j == 0) {
            acc[v] = k0 == 0 ? x : detail::LoadF8(out + i + v * detail::kLanes) + x;
          } else {
            acc[v] = acc[v] + x;
          }
        }
        left[j] -= kStep;
        if (left[j] == 0) {
          ++blk[j];
          left[j] = static_cast<size_t>(p.block_size);
        }
      }
      for (size_t v = 0; v < 4; ++v) {
        detail::StoreF8(out + i + v * detail::kLanes, scale_at_end ? acc[v] * inv_v : acc[v]);
      }
    }
  }
  // The last count % 32 elements, element by element.
  for (size_t o = full; o < count; ++o) {
    const size_t i = begin + o;
    float acc = 0.0f;
    for (size_t k = 0; k < n; ++k) {
      const PayloadView& p = payloads[k];
      const uint8_t field_at_top =
          static_cast<uint8_t>(p.data[i * kBits / 8] << (8 - kBits - i * kBits % 8));
      const int code = static_cast<int8_t>(field_at_top) >> (8 - kBits);
      const float x = static_cast<float>(code) * p.scales[i / static_cast<size_t>(p.block_size)];
      acc = k == 0 ? x : acc + x;
    }
    out[o] = n > 1 ? acc * inv_n : acc;
  }
}

LOCO_CPU_CLONES void AccumulateBlockQuantClones(const PayloadView* payloads, size_t n, size_t begin,
                                                size_t count, int bits, float* out) {
  switch (bits) {
    case 2: AccumulateBlockQuant<2>(payloads, n, begin, count, out); break;
    case 4: AccumulateBlockQuant<4>(payloads, n, begin, count, out); break;
    default: AccumulateBlockQuant<8>(payloads, n, begin, count, out); break;
  }
}

}  // namespace

namespace detail {

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void AccumulateBlockQuantAvx2(const PayloadView* payloads, size_t n,
                                                              size_t begin, size_t count, int bits,
                                                              float* out) {
  switch (bits) {
    case 2: AccumulateBlockQuant<2>(payloads, n, begin, count, out); break;
    case 4: AccumulateBlockQuant<4>(payloads, n, begin, count, out); break;
    default: AccumulateBlockQuant<8>(payloads, n, begin, count, out); break;
  }
}
#else
void AccumulateBlockQuantAvx2(const PayloadView*, size_t, size_t, size_t, int, float*) {}
#endif

}  // namespace detail

namespace {

// The bits shared by every payload when all are block-quant, else 0.
int CommonBlockQuantBits(const PayloadView* payloads, size_t n) {
  const int bits = payloads[0].bits;
  for (size_t k = 0; k < n; ++k) {
    if (payloads[k].codec != PayloadCodec::kBlockQuant || payloads[k].bits != bits) return 0;
  }
  return bits;
}

}  // namespace

Status DecodeAccumulate(const PayloadView* payloads, size_t n, size_t length, float* out) {
  if (n == 0 || payloads == nullptr) {
    return InvalidArgument("DecodeAccumulate needs at least one payload (got none)");
  }
  for (size_t k = 0; k < n; ++k) {
    if (Status s = ValidatePayload(payloads[k], length); !s.ok()) {
      return s.Annotate("payload " + std::to_string(k));
    }
  }
  return DecodeAccumulateRange(payloads, n, length, 0, length, out);
}

Status DecodeAccumulateRange(const PayloadView* payloads, size_t n, size_t length, size_t begin,
                             size_t count, float* out) {
  if (n == 0 || payloads == nullptr) {
    return InvalidArgument("DecodeAccumulateRange needs at least one payload (got none)");
  }
  if (begin % kDecodeRangeAlign != 0 || begin > length || count > length - begin) {
    return InvalidArgument("DecodeAccumulateRange of [" + std::to_string(begin) + ", +" +
                           std::to_string(count) + ") is not a range of the " +
                           std::to_string(length) + " elements starting at a multiple of " +
                           std::to_string(kDecodeRangeAlign));
  }
  if (count > 0 && out == nullptr) {
    return InvalidArgument("DecodeAccumulate of " + std::to_string(count) +
                           " elements needs a non-null out");
  }
  if (count == 0) return Status::Ok();
  if (const int bits = CommonBlockQuantBits(payloads, n); bits != 0) {
    // 4-bit payloads on AVX-512: by table (kernels/decode_accumulate_avx512.h),
    // but for the last count % 32 elements.
    const size_t by_table = bits == 4 && detail::HaveAvx512() ? count - count % 32 : 0;
    if (by_table != 0) {
      // Read: half a byte per element and payload; written: 4 bytes.
      const size_t working_set = by_table * 4 + by_table * n / 2;
      detail::AccumulateFourBitAvx512(payloads, n, begin, by_table,
                                      working_set >= detail::StreamingStoreBytes(), out);
    }
    if (by_table != count) {
      AccumulateBlockQuantClones(payloads, n, begin + by_table, count - by_table, bits,
                                 out + by_table);
    }
  } else {
    AccumulateTiles(payloads, n, begin, count, out);
  }
  return Status::Ok();
}

}  // namespace cpu
}  // namespace loco
