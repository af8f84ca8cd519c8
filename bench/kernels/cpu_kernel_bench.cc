#include "cpu_kernel_bench.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bytes_moved.h"
#include "kernels/adamw.h"
#include "kernels/avx2_clones.h"
#include "kernels/decode_accumulate.h"
#include "kernels/loco_compress.h"
#include "kernels/loco_compress_avx512.h"
#include "kernels/quantize.h"
#include "parallel_chunks.h"

namespace loco::bench {
namespace {

// Deterministic values in (-1, 1), filled in parallel (xorshift per chunk).
void FillUniform(std::vector<float>& v, uint64_t seed, int threads) {
  (void)ParallelChunks(v.size(), 4096, threads, [&](size_t begin, size_t len) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + begin + 1;
    for (size_t i = begin; i < begin + len; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      v[i] = static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) * (1.0f / 8388608.0f);
    }
    return Status::Ok();
  });
}

// The compress workload at blocks of kBlockSize elements (kBlock, or the
// larger blocks that show what each block's own work costs).
template <int kBlockSize>
struct LocoWorkloadAt {
  static constexpr size_t kChunkAlign = kBlockSize;  // a thread's chunk: whole blocks
  explicit LocoWorkloadAt(size_t n, int threads)
      : g(n),
        state(n, kBlockSize, 8),
        codes(PackedBytes(n, kBits)),
        scales(NumBlocks(n, kBlockSize)) {
    FillUniform(g, 1, threads);
    p.mode = CompensationMode::kLoco;
    p.bits = kBits;
    p.block_size = kBlockSize;
    p.beta = 0.5f;
  }
  Status Run(size_t begin, size_t len, int64_t step) {
    LocoParams chunk = p;
    chunk.index_offset = begin;
    ErrorStateView v = state.view();
    v.codes += begin;
    v.scales += begin / kBlockSize;
    if (forced != nullptr) {
      // One path whatever this CPU would pick (no reset: reset_period is 0).
      forced(g.data() + begin, len, false, chunk, v, codes.data() + begin * kBits / 8,
             scales.data() + begin / kBlockSize, nullptr);
      return Status::Ok();
    }
    return cpu::LocoCompress(g.data() + begin, len, step, chunk, v,
                             codes.data() + begin * kBits / 8, scales.data() + begin / kBlockSize,
                             nullptr);
  }
  static size_t Bytes(size_t n) { return LocoCompressBytes(n, kBits, kBlockSize); }

  std::vector<float> g;
  ErrorState state;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  LocoParams p;
  // A path of kernels/loco_compress_avx512.h to run instead of the one
  // cpu::LocoCompress picks; null: that one.
  void (*forced)(const float*, size_t, bool, const LocoParams&, ErrorStateView, uint8_t*, float*,
                 LocoStats*) = nullptr;
};

using LocoWorkload = LocoWorkloadAt<kBlock>;

// LocoWorkload on the portable path, the one x86-64 CPUs without AVX2 run.
struct LocoPortableWorkload : LocoWorkload {
  LocoPortableWorkload(size_t n, int threads) : LocoWorkload(n, threads) {
    forced = cpu::detail::LocoCompressPortable;
  }
};

// LocoWorkload on the AVX2 path, the one CPUs without AVX-512 run.
struct LocoAvx2Workload : LocoWorkload {
  LocoAvx2Workload(size_t n, int threads) : LocoWorkload(n, threads) {
    forced = cpu::detail::LocoCompressAvx2;
  }
};

// LocoWorkload on the AVX-512 path below the Ice Lake level (what
// Skylake-X and Cascade Lake run).
struct LocoAvx512Workload : LocoWorkload {
  LocoAvx512Workload(size_t n, int threads) : LocoWorkload(n, threads) {
    forced = cpu::detail::LocoCompressAvx512;
  }
};

struct DecodeWorkload {
  explicit DecodeWorkload(size_t n, int threads) : out(n) {
    std::vector<float> x(n);
    QuantizeParams q;
    q.bits = kBits;
    q.block_size = kBlock;
    for (int w = 0; w < kWorkers; ++w) {
      FillUniform(x, 10 + static_cast<uint64_t>(w), threads);
      codes[w].resize(PackedBytes(n, kBits));
      scales[w].resize(NumBlocks(n, kBlock));
      (void)ParallelChunks(n, kBlock, threads, [&](size_t begin, size_t len) {
        return cpu::Quantize(x.data() + begin, len, q, codes[w].data() + begin * kBits / 8,
                             scales[w].data() + begin / kBlock, nullptr);
      });
    }
  }
  Status Run(size_t begin, size_t len, int64_t) {
    PayloadView views[kWorkers];
    for (int w = 0; w < kWorkers; ++w) {
      views[w].codec = PayloadCodec::kBlockQuant;
      views[w].bits = kBits;
      views[w].block_size = kBlock;
      views[w].data = codes[w].data() + begin * kBits / 8;
      views[w].data_bytes = PackedBytes(len, kBits);
      views[w].scales = scales[w].data() + begin / kBlock;
      views[w].num_scales = NumBlocks(len, kBlock);
    }
    if (forced != nullptr) {
      // One path whatever this CPU would pick (chunks are whole blocks:
      // multiples of 32).
      forced(views, kWorkers, 0, len, out.data() + begin);
      return Status::Ok();
    }
    return cpu::DecodeAccumulate(views, kWorkers, len, out.data() + begin);
  }
  static size_t Bytes(size_t n) { return DecodeAccumulateBytes(n, kWorkers, kBits, kBlock); }

  std::vector<uint8_t> codes[kWorkers];
  std::vector<float> scales[kWorkers];
  std::vector<float> out;
  // A path of kernels/decode_accumulate_*.h to run instead of the one
  // cpu::DecodeAccumulate picks; null: that one.
  void (*forced)(const PayloadView*, size_t, size_t, size_t, float*) = nullptr;
};

// DecodeWorkload on the AVX2 instance, the one CPUs without AVX-512 run.
struct DecodeAvx2Workload : DecodeWorkload {
  DecodeAvx2Workload(size_t n, int threads) : DecodeWorkload(n, threads) {
    forced = [](const PayloadView* payloads, size_t n, size_t begin, size_t count, float* out) {
      cpu::detail::AccumulateBlockQuantAvx2(payloads, n, begin, count, kBits, out);
    };
  }
};

struct AdamWWorkload {
  explicit AdamWWorkload(size_t n, int threads) : params(n), m(n), v(n), grad(n) {
    FillUniform(params, 20, threads);
    FillUniform(grad, 21, threads);
    p.weight_decay = 0.01f;
  }
  Status Run(size_t begin, size_t len, int64_t step) {
    return cpu::AdamW(params.data() + begin, m.data() + begin, v.data() + begin, grad.data() + begin, len,
                      step + 1, p, 1.0f);
  }
  static size_t Bytes(size_t n) { return AdamWBytes(n); }

  std::vector<float> params, m, v, grad;
  AdamWParams p;
};

// The server's return delta (server/return_path.cc): a master a step away
// from its replica, encoded in the server's 64K-element pieces. Odd and
// even calls aim at two masters 2e-3 apart, so that the replica, which
// each call moves to within half a scale of its target, never catches up.
struct ReturnDeltaWorkload {
  static constexpr size_t kPiece = 64 * 1024;
  explicit ReturnDeltaWorkload(size_t n, int threads)
      : replica(n), codes(PackedBytes(n, kBits)), scales(NumBlocks(n, kBlock)) {
    FillUniform(replica, 30, threads);
    for (int k = 0; k < 2; ++k) {
      std::vector<float>& m = masters[k];
      m.resize(n);
      FillUniform(m, 31 + static_cast<uint64_t>(k), threads);
      const float sign = k == 0 ? 1.0f : -1.0f;
      (void)ParallelChunks(n, 4096, threads, [&](size_t begin, size_t len) {
        for (size_t i = begin; i < begin + len; ++i) {
          m[i] = replica[i] + sign * 1e-3f * (1.0f + std::fabs(m[i]));
        }
        return Status::Ok();
      });
    }
  }
  Status Run(size_t begin, size_t len, int64_t step) {
    const std::vector<float>& master = masters[step % 2];
    for (size_t at = begin; at < begin + len; at += kPiece) {
      const size_t count = std::min(kPiece, begin + len - at);
      uint8_t* c = codes.data() + at * kBits / 8;
      float* s = scales.data() + at / kBlock;
      if (avx2) {
        (void)cpu::detail::QuantizeDeltaAvx2(master.data() + at, replica.data() + at, count, kBits,
                                             kBlock, c, s);
        continue;
      }
      if (!three_calls) {
        LOCO_RETURN_IF_ERROR(cpu::QuantizeDeltaAdd(master.data() + at, replica.data() + at, count,
                                                   kBits, kBlock, c, s, nullptr));
        continue;
      }
      // What the return path did before the one-pass encoder: the
      // difference into a scratch piece, Quantize, DequantizeAdd.
      thread_local std::vector<float> scratch(kPiece);
      for (size_t i = 0; i < count; ++i) scratch[i] = master[at + i] - replica[at + i];
      QuantizeParams q;
      q.bits = kBits;
      q.block_size = kBlock;
      LOCO_RETURN_IF_ERROR(cpu::Quantize(scratch.data(), count, q, c, s, nullptr));
      LOCO_RETURN_IF_ERROR(
          cpu::DequantizeAdd(c, s, count, kBits, kBlock, replica.data() + at));
    }
    return Status::Ok();
  }
  static size_t Bytes(size_t n) { return ReturnDeltaBytes(n, kBits, kBlock); }

  std::vector<float> masters[2], replica;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  bool three_calls = false;
  bool avx2 = false;  // the AVX2 instance, whatever this CPU would pick
};

struct ReturnDeltaThreeCallsWorkload : ReturnDeltaWorkload {
  ReturnDeltaThreeCallsWorkload(size_t n, int threads) : ReturnDeltaWorkload(n, threads) {
    three_calls = true;
  }
};

// ReturnDeltaWorkload on the AVX2 instance, the one CPUs without AVX-512 run.
struct ReturnDeltaAvx2Workload : ReturnDeltaWorkload {
  ReturnDeltaAvx2Workload(size_t n, int threads) : ReturnDeltaWorkload(n, threads) { avx2 = true; }
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// memcpy calls moving `bytes` in total (bytes/2 read, bytes/2 written),
// split over `threads` like the kernels: the baseline a kernel's bytes/s
// is compared with.
class CopyBaseline {
 public:
  CopyBaseline(size_t bytes, int threads) : half_(bytes / 2), threads_(threads),
                                            src_(half_, 1), dst_(half_, 0) {}
  // One timed copy; keeps the fastest.
  void TimeOnce() {
    const auto t0 = Clock::now();
    CopyOnce();
    best_ = std::min(best_, Seconds(t0));
  }
  // One copy, not timed: the first touches the buffers' pages.
  void CopyOnce() {
    (void)ParallelChunks(half_, 4096, threads_, [&](size_t begin, size_t len) {
      std::memcpy(dst_.data() + begin, src_.data() + begin, len);
      return Status::Ok();
    });
    benchmark::ClobberMemory();
    benchmark::DoNotOptimize(dst_.data());
  }
  double best() const { return best_; }

 private:
  size_t half_;
  int threads_;
  std::vector<char> src_, dst_;
  double best_ = 1e30;
};

// The unit a thread's chunk is a multiple of: the workload's block.
template <typename Workload>
constexpr size_t ChunkAlign() {
  if constexpr (requires { Workload::kChunkAlign; }) {
    return Workload::kChunkAlign;
  } else {
    return kBlock;
  }
}

// The benchmark's Time column is the mean over iterations of the kernel.
// The ratio uses the fastest iteration of the kernel and the fastest of as
// many copies, timed in alternation (kernel, copy, kernel, ...): on a
// shared machine other load only ever slows a run down, and memory
// bandwidth drifts over seconds, so the fastest of each, taken over the
// same stretch of time, distorts the ratio least. (Timing all the
// kernel's iterations first and the copies after gave ratios from 0.53 to
// 0.96 for one kernel in three runs here.)
template <typename Workload>
void RunCpuBenchmark(benchmark::State& st, size_t n, int threads) {
  const size_t bytes = Workload::Bytes(n);
  double kernel_best = 1e30;
  CopyBaseline copy(bytes, threads);
  {
    Workload w(n, threads);
    int64_t step = 0;
    auto once = [&] {
      return ParallelChunks(n, ChunkAlign<Workload>(), threads,
                            [&](size_t b, size_t l) { return w.Run(b, l, step); });
    };
    if (Status s = once(); !s.ok()) {  // warm-up; also checks the workload is valid
      st.SkipWithError(s.ToString().c_str());
      return;
    }
    copy.CopyOnce();  // warm-up
    for (auto _ : st) {
      ++step;
      const auto t0 = Clock::now();
      if (Status s = once(); !s.ok()) {
        st.SkipWithError(s.ToString().c_str());
        return;
      }
      kernel_best = std::min(kernel_best, Seconds(t0));
      st.PauseTiming();
      copy.TimeOnce();
      st.ResumeTiming();
    }
  }
  // As many timed copies as kernel calls, at least 3.
  for (int64_t r = st.iterations(); r < 3; ++r) copy.TimeOnce();
  st.SetBytesProcessed(st.iterations() * static_cast<int64_t>(bytes));
  const double copy_best = copy.best();
  st.counters["MB_moved"] = static_cast<double>(bytes) / 1e6;
  st.counters["best_GB/s"] = static_cast<double>(bytes) / kernel_best / 1e9;
  st.counters["copy_best_GB/s"] = static_cast<double>(bytes) / copy_best / 1e9;
  st.counters["ratio_vs_copy"] = copy_best / kernel_best;
}

template <typename Workload>
void Register(const std::string& kernel, const BenchConfig& config) {
  for (size_t n : config.sizes) {
    for (int threads : {1, AllCores()}) {
      const std::string name = "cpu/" + kernel + "/n:" + std::to_string(n) + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), [n, threads](benchmark::State& st) {
        RunCpuBenchmark<Workload>(st, n, threads);
      })
          ->Iterations(config.CpuIterations(n))
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      if (AllCores() == 1) break;
    }
  }
}

}  // namespace

void RegisterCpuKernelBenchmarks(const BenchConfig& config) {
  Register<LocoWorkload>("loco_compress_4bit", config);
  // The path this CPU picks at the service's default block (256) and at
  // 1024: against kBlock's figure, what each block's own work (its
  // reductions, scales and bookkeeping) costs.
  Register<LocoWorkloadAt<256>>("loco_compress_4bit_block256", config);
  Register<LocoWorkloadAt<1024>>("loco_compress_4bit_block1024", config);
  if (cpu::detail::HaveAvx512Icl()) {
    Register<LocoAvx512Workload>("loco_compress_4bit_avx512", config);
  }
  if (cpu::detail::HaveAvx512() && cpu::detail::HaveAvx2()) {
    Register<LocoAvx2Workload>("loco_compress_4bit_avx2", config);
  }
  if (cpu::detail::HaveAvx2()) {
    Register<LocoPortableWorkload>("loco_compress_4bit_portable", config);
  }
  Register<DecodeWorkload>("decode_accumulate_4x4bit", config);
  if (cpu::detail::HaveAvx512() && cpu::detail::HaveAvx2()) {
    Register<DecodeAvx2Workload>("decode_accumulate_4x4bit_avx2", config);
  }
  Register<AdamWWorkload>("adamw", config);
  Register<ReturnDeltaWorkload>("return_delta_4bit", config);
  if (cpu::detail::HaveAvx512() && cpu::detail::HaveAvx2()) {
    Register<ReturnDeltaAvx2Workload>("return_delta_4bit_avx2", config);
  }
  Register<ReturnDeltaThreeCallsWorkload>("return_delta_4bit_three_calls", config);
}

}  // namespace loco::bench
