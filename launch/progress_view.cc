#include "launch/progress_view.h"

#include <algorithm>
#include <cmath>

namespace loco {

ProgressView::ProgressView(Mode mode, std::FILE* out, std::chrono::milliseconds period)
    : mode_(mode), out_(out), period_(period), start_(std::chrono::steady_clock::now()) {}

std::string ProgressView::FormatLine(const ProgressSnapshot& s, double elapsed_s, bool bar) {
  double frac = s.total_steps ? std::min(1.0, double(s.step) / double(s.total_steps)) : 0.0;
  char eta[32] = "--:--";
  if (s.step > 0 && frac > 0) {
    double left = elapsed_s * (1.0 - frac) / frac;
    std::snprintf(eta, sizeof(eta), "%d:%02d", int(left) / 60, int(left) % 60);
  }
  double saved = s.fp32_bytes > 0 ? 100.0 * (1.0 - s.wire_bytes / s.fp32_bytes) : 0.0;
  char buf[320];
  if (bar) {
    constexpr int kWidth = 24;
    int filled = int(std::round(frac * kWidth));
    std::string b(filled, '#');
    b.resize(kWidth, '.');
    std::snprintf(buf, sizeof(buf),
                  "[%s] %3.0f%% step %llu/%llu ETA %s | loss %.4f | %.0f samples/s | "
                  "wire %.1f MB vs fp32 %.1f MB (%.1f%% saved) | %d workers",
                  b.c_str(), frac * 100, (unsigned long long)s.step,
                  (unsigned long long)s.total_steps, eta, s.loss, s.samples_per_s,
                  s.wire_bytes / 1e6, s.fp32_bytes / 1e6, saved, s.workers);
  } else {
    std::snprintf(buf, sizeof(buf),
                  "step %llu/%llu (%.0f%%, ETA %s) loss %.4f samples/s %.0f wire %.1f MB "
                  "fp32 %.1f MB saved %.1f%% workers %d",
                  (unsigned long long)s.step, (unsigned long long)s.total_steps, frac * 100,
                  eta, s.loss, s.samples_per_s, s.wire_bytes / 1e6, s.fp32_bytes / 1e6, saved,
                  s.workers);
  }
  return buf;
}

void ProgressView::Update(const ProgressSnapshot& s, bool force) {
  if (mode_ == Mode::kNone) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && rendered_ && now - last_ < period_) return;
  last_ = now;
  rendered_ = true;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  if (mode_ == Mode::kBar) {
    std::fprintf(out_, "\r\033[K%s", FormatLine(s, elapsed, true).c_str());
  } else {
    std::fprintf(out_, "%s\n", FormatLine(s, elapsed, false).c_str());
  }
  std::fflush(out_);
}

void ProgressView::Finish() {
  if (mode_ == Mode::kBar && rendered_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

}  // namespace loco
