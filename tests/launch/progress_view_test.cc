#include "launch/progress_view.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

TEST(ProgressView, LineShowsStepEtaLossAndSaving) {
  ProgressSnapshot s;
  s.step = 50;
  s.total_steps = 200;
  s.loss = 0.5;
  s.samples_per_s = 1000;
  s.wire_bytes = 12.5e6;
  s.fp32_bytes = 100e6;
  s.workers = 4;
  // 50 of 200 steps in 30 s: 90 s left.
  std::string plain = ProgressView::FormatLine(s, 30.0, false);
  EXPECT_NE(plain.find("step 50/200"), std::string::npos) << plain;
  EXPECT_NE(plain.find("ETA 1:30"), std::string::npos) << plain;
  EXPECT_NE(plain.find("loss 0.5000"), std::string::npos) << plain;
  EXPECT_NE(plain.find("saved 87.5%"), std::string::npos) << plain;
  std::string bar = ProgressView::FormatLine(s, 30.0, true);
  EXPECT_NE(bar.find("[######..................]"), std::string::npos) << bar;
}

TEST(ProgressView, NoEtaBeforeTheFirstStep) {
  ProgressSnapshot s;
  s.total_steps = 10;
  EXPECT_NE(ProgressView::FormatLine(s, 5.0, false).find("ETA --:--"), std::string::npos);
}

}  // namespace
}  // namespace loco
