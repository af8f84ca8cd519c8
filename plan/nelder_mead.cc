#include "plan/nelder_mead.h"

#include <algorithm>
#include <numeric>

namespace loco::plan {
namespace {

// a + t * (b - a)
std::vector<double> Along(const std::vector<double>& a, const std::vector<double>& b, double t) {
  std::vector<double> out(a.size());
  for (size_t j = 0; j < a.size(); ++j) out[j] = a[j] + t * (b[j] - a[j]);
  return out;
}

}  // namespace

SimplexResult MinimizeNelderMead(const std::function<double(const std::vector<double>&)>& f,
                                 const std::vector<double>& start, double step, int iterations) {
  const size_t n = start.size();
  std::vector<std::vector<double>> points(n + 1, start);
  for (size_t i = 0; i < n; ++i) points[i + 1][i] += step;
  std::vector<double> values(n + 1);
  for (size_t i = 0; i <= n; ++i) values[i] = f(points[i]);
  std::vector<size_t> order(n + 1);
  for (int it = 0; it < iterations; ++it) {
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return values[a] < values[b]; });
    const size_t best = order[0], worst = order[n], second_worst = order[n - 1];
    std::vector<double> centroid(n, 0.0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) centroid[j] += points[order[i]][j] / static_cast<double>(n);
    }
    const std::vector<double> reflected = Along(centroid, points[worst], -1.0);
    const double fr = f(reflected);
    if (fr < values[best]) {
      const std::vector<double> expanded = Along(centroid, points[worst], -2.0);
      const double fe = f(expanded);
      points[worst] = fe < fr ? expanded : reflected;
      values[worst] = std::min(fe, fr);
    } else if (fr < values[second_worst]) {
      points[worst] = reflected;
      values[worst] = fr;
    } else {
      const std::vector<double> contracted = Along(centroid, points[worst], 0.5);
      const double fc = f(contracted);
      if (fc < values[worst]) {
        points[worst] = contracted;
        values[worst] = fc;
      } else {
        for (size_t i = 1; i <= n; ++i) {
          points[order[i]] = Along(points[best], points[order[i]], 0.5);
          values[order[i]] = f(points[order[i]]);
        }
      }
    }
  }
  const size_t best = static_cast<size_t>(std::min_element(values.begin(), values.end()) -
                                          values.begin());
  return {points[best], values[best]};
}

}  // namespace loco::plan
