// loco-bench-small-batch: the three products of one dense layer's step
// (forward, weight gradient, input gradient) for a batch of a few rows, on
// each vector path of SmallBatchGemm this CPU runs and on OpenBLAS (one
// thread, the products Mlp would otherwise call), timed in alternation in
// one process (bench/README.md, "The small-batch products"):
//
//   loco-bench-small-batch [--size 3072] [--rows 8,16,32] [--reps 15]
//
// For each row count, each product and each path: the best and the median
// of --reps repetitions in milliseconds, and OpenBLAS's best over the
// path's best (above 1: the path is faster). Every repetition times every
// path once, so that a slower stretch of a shared machine falls on all.
// A row count above a path's SmallBatchGemm::MaxRows is timed without it.
// Before timing, each path's outputs are checked against the plain loops
// (the same bits); a mismatch is an error (exit 1).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/e2e/number_list.h"
#include "models/small_batch_gemm.h"

namespace {

using Clock = std::chrono::steady_clock;
using loco::SmallBatchGemm;
using Path = SmallBatchGemm::Path;
using loco::bench::ParseNumberList;

constexpr const char* kUsage =
    "usage: loco-bench-small-batch [--size 64..8192 (the layer is size x size)] "
    "[--rows 8,16,32 (each 1..64; a path times those it takes)] [--reps 1..1000]\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "loco-bench-small-batch: %s\n%s", why.c_str(), kUsage);
  return 2;
}

struct Config {
  long size = 3072;
  std::vector<long> rows = {8, 16, 32};
  long reps = 15;
};

// 0: parsed; otherwise the exit code (2 after a usage message).
int ParseFlags(int argc, char** argv, Config* c) {
  for (int k = 1; k < argc; ++k) {
    const std::string flag = argv[k];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 1;
    }
    if (k + 1 >= argc) return Usage(flag + " needs a value");
    const std::string value = argv[++k];
    if (flag == "--size") {
      const auto v = ParseNumberList(value, 64, 8192);
      if (v.size() != 1)
        return Usage("--size must be one integer in 64..8192, got '" + value + "'");
      c->size = v[0];
    } else if (flag == "--rows") {
      c->rows = ParseNumberList(value, 1, static_cast<long>(SmallBatchGemm::kMaxRows));
      if (c->rows.empty()) {
        return Usage("--rows must be a comma-separated list of integers in 1..64, got '" + value +
                     "'");
      }
    } else if (flag == "--reps") {
      const auto v = ParseNumberList(value, 1, 1000);
      if (v.size() != 1) return Usage("--reps must be one integer in 1..1000, got '" + value + "'");
      c->reps = v[0];
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  return 0;
}

const char* PathName(Path p) {
  switch (p) {
    case Path::kAvx512:
      return "avx512";
    case Path::kAvx2:
      return "avx2";
    case Path::kPortable:
      return "portable";
  }
  return "?";
}

// One layer's operands, and one product computed by a named way.
struct Layer {
  size_t n, o, i;
  std::vector<float> x, w, delta, out;
};
enum class Product { kForward, kWeightGradient, kInputGradient };
constexpr Product kProducts[] = {Product::kForward, Product::kWeightGradient,
                                 Product::kInputGradient};
const char* ProductName(Product p) {
  return p == Product::kForward          ? "forward"
         : p == Product::kWeightGradient ? "weight gradient"
                                         : "input gradient";
}

void RunOurs(SmallBatchGemm& gemm, Product p, Layer& l) {
  switch (p) {
    case Product::kForward:
      std::fill_n(l.out.begin(), l.n * l.o, 0.0f);  // what it adds to (Mlp: the bias)
      gemm.Forward(l.x.data(), l.n, l.w.data(), l.o, l.i, l.out.data());
      break;
    case Product::kWeightGradient:
      gemm.WeightGradient(l.delta.data(), l.n, l.o, l.x.data(), l.i, 0, l.o, l.out.data());
      break;
    case Product::kInputGradient:
      gemm.InputGradient(l.delta.data(), l.n, l.w.data(), l.o, l.i, l.out.data());
      break;
  }
}

// The calls Mlp makes when the small-batch products do not suit.
void RunOpenBlas(Product p, Layer& l) {
  const int n = static_cast<int>(l.n), o = static_cast<int>(l.o), i = static_cast<int>(l.i);
  switch (p) {
    case Product::kForward:
      std::fill_n(l.out.begin(), l.n * l.o, 0.0f);  // what it adds to (Mlp: the bias)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, o, i, 1.0f, l.x.data(), i, l.w.data(),
                  i, 1.0f, l.out.data(), o);
      break;
    case Product::kWeightGradient:
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o, i, n, 1.0f, l.delta.data(), o,
                  l.x.data(), i, 0.0f, l.out.data(), i);
      break;
    case Product::kInputGradient:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, i, o, 1.0f, l.delta.data(), o,
                  l.w.data(), i, 0.0f, l.out.data(), i);
      break;
  }
}

double TimeMs(const std::function<void()>& f) {
  const auto start = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The outputs of each path against the plain loops', bit for bit.
bool SameBitsAsThePlainLoops(const std::vector<Path>& paths, Layer& l) {
  SmallBatchGemm portable(Path::kPortable);
  for (Product p : kProducts) {
    RunOurs(portable, p, l);
    const std::vector<float> reference = l.out;
    for (Path path : paths) {
      SmallBatchGemm gemm(path);
      RunOurs(gemm, p, l);
      if (std::memcmp(l.out.data(), reference.data(), reference.size() * sizeof(float)) != 0) {
        std::fprintf(stderr,
                     "loco-bench-small-batch: the %s path's %s differs from the plain loops\n",
                     PathName(path), ProductName(p));
        return false;
      }
    }
  }
  return true;
}

// Times every way of one product, alternating; prints a row per way.
void TimeProduct(const Config& c, const std::vector<Path>& paths, Product p, Layer& l) {
  std::vector<SmallBatchGemm> gemms;
  for (Path path : paths) gemms.emplace_back(path);
  const size_t ways = paths.size() + 1;  // the paths, then OpenBLAS
  std::vector<std::vector<double>> ms(ways);
  for (long rep = -1; rep < c.reps; ++rep) {  // rep -1: warm-up, not kept
    for (size_t k = 0; k < ways; ++k) {
      const double t = k < paths.size() ? TimeMs([&] { RunOurs(gemms[k], p, l); })
                                        : TimeMs([&] { RunOpenBlas(p, l); });
      if (rep >= 0) ms[k].push_back(t);
    }
  }
  for (auto& v : ms) std::sort(v.begin(), v.end());
  const double blas_best = ms.back().front();
  for (size_t k = 0; k < ways; ++k) {
    const bool blas = k == paths.size();
    std::printf("rows %3zu  %-16s %-9s best %8.3f ms  median %8.3f ms", l.n, ProductName(p),
                blas ? "openblas" : PathName(paths[k]), ms[k].front(), ms[k][ms[k].size() / 2]);
    if (!blas) std::printf("  openblas/this %.2f", blas_best / ms[k].front());
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (const int code = ParseFlags(argc, argv, &c); code != 0) return code == 1 ? 0 : code;
  openblas_set_num_threads(1);
  std::vector<Path> paths;
  for (Path p : {Path::kAvx512, Path::kAvx2}) {
    if (SmallBatchGemm::Runs(p)) paths.push_back(p);
  }
  const size_t size = static_cast<size_t>(c.size);
  std::printf("layer %zu x %zu, one thread, %ld repetitions; vector paths here:", size, size,
              c.reps);
  for (Path p : paths) std::printf(" %s", PathName(p));
  std::printf("%s\n", paths.empty() ? " none (only OpenBLAS is timed)" : "");
  if (SmallBatchGemm::Runs(Path::kAvx512)) {
    std::printf("%s\n", SmallBatchGemm::Describe(Path::kAvx512).c_str());
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (long rows : c.rows) {
    Layer l{static_cast<size_t>(rows), size, size, {}, {}, {}, {}};
    l.x.resize(l.n * l.i);
    l.w.resize(l.o * l.i);
    l.delta.resize(l.n * l.o);
    l.out.resize(l.o * l.i);  // the largest output (the weight gradient)
    for (auto* v : {&l.x, &l.w, &l.delta}) {
      for (float& f : *v) f = normal(rng);
    }
    std::vector<Path> taking;  // the paths that take this many rows
    for (Path p : paths) {
      if (l.n <= SmallBatchGemm::MaxRows(p)) taking.push_back(p);
    }
    if (!SameBitsAsThePlainLoops(taking, l)) return 1;
    for (Product p : kProducts) TimeProduct(c, taking, p, l);
  }
  return 0;
}
