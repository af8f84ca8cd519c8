// loco-worker's progress events: the exact text of each line (the launcher
// parses it), numbers with round-trip precision (common/format_double.h) and null for what is not finite, and the
// parameters' CRC as zlib's CRC-32 of their bytes.
#include "worker/worker_events.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace loco {
namespace {

TrafficStats SomeTraffic() {
  TrafficStats t;
  t.push_wire_bytes = 1000;
  t.push_fp32_bytes = 8000;
  t.pull_wire_bytes = 2000;
  t.pull_fp32_bytes = 16000;
  t.steps = 9;  // not an event field
  return t;
}

TEST(WorkerEventsTest, NumbersRoundTripOrNull) {
  EXPECT_EQ(JsonNumber(0.5), "0.5");
  // The launcher reads back the double that was written, not a rounded one.
  for (double x : {1.0 / 3.0, 1234567.0, 0.1 + 0.2, 1e-7, 2.5e-300}) {
    EXPECT_EQ(std::strtod(JsonNumber(x).c_str(), nullptr), x) << JsonNumber(x);
  }
  EXPECT_EQ(JsonNumber(1234567.0), "1234567");
  EXPECT_EQ(JsonNumber(0), "0");
  EXPECT_EQ(JsonNumber(std::nan("")), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity()), "null");
}

TEST(WorkerEventsTest, StepEvent) {
  StepEventFields f;
  f.worker = 3;
  f.rank = 1;
  f.world = 4;
  f.step = 17;
  f.loss = 0.25;
  f.samples_per_s = 1500.5;
  f.traffic = SomeTraffic();
  f.resynced = false;
  f.nonfinite = 2;
  f.step_s = 0.125;
  f.compute_s = 0.0625;
  EXPECT_EQ(StepEvent(f),
            "{\"event\":\"step\",\"worker\":3,\"rank\":1,\"world\":4,\"step\":17,\"loss\":0.25,"
            "\"samples_per_s\":1500.5,\"push_wire_bytes\":1000,\"push_fp32_bytes\":8000,"
            "\"pull_wire_bytes\":2000,\"pull_fp32_bytes\":16000,\"resynced\":false,"
            "\"nonfinite\":2,\"step_s\":0.125,\"compute_s\":0.0625}");
  // --report-params-crc puts the CRC after "resynced"; a NaN loss is null.
  f.resynced = true;
  f.params_crc = 4294967295u;
  f.loss = std::nan("");
  EXPECT_EQ(StepEvent(f),
            "{\"event\":\"step\",\"worker\":3,\"rank\":1,\"world\":4,\"step\":17,\"loss\":null,"
            "\"samples_per_s\":1500.5,\"push_wire_bytes\":1000,\"push_fp32_bytes\":8000,"
            "\"pull_wire_bytes\":2000,\"pull_fp32_bytes\":16000,\"resynced\":true,"
            "\"params_crc\":4294967295,\"nonfinite\":2,\"step_s\":0.125,\"compute_s\":0.0625}");
}

TEST(WorkerEventsTest, EvalEvent) {
  EXPECT_EQ(EvalEvent(2, 470, 2, 0.8698, 0.3712),
            "{\"event\":\"eval\",\"worker\":2,\"step\":470,\"epoch\":2,"
            "\"test_accuracy\":0.8698,\"test_loss\":0.3712}");
}

TEST(WorkerEventsTest, DoneEventWithAndWithoutAccuracy) {
  EXPECT_EQ(DoneEvent(5, 470, 0.875, 123456789u, 23.25, SomeTraffic()),
            "{\"event\":\"done\",\"worker\":5,\"steps\":470,\"test_accuracy\":0.875,"
            "\"params_crc\":123456789,\"wall_s\":23.25,\"push_wire_bytes\":1000,"
            "\"push_fp32_bytes\":8000,\"pull_wire_bytes\":2000,\"pull_fp32_bytes\":16000}");
  EXPECT_EQ(DoneEvent(5, 470, std::nullopt, 7u, 1.5, TrafficStats{}),
            "{\"event\":\"done\",\"worker\":5,\"steps\":470,\"params_crc\":7,\"wall_s\":1.5,"
            "\"push_wire_bytes\":0,\"push_fp32_bytes\":0,\"pull_wire_bytes\":0,"
            "\"pull_fp32_bytes\":0}");
}

TEST(WorkerEventsTest, MembershipEvents) {
  EXPECT_EQ(WaitingEvent(100), "{\"event\":\"waiting\",\"join_at_step\":100}");
  EXPECT_EQ(JoinedEvent(7, 0, false, 42u),
            "{\"event\":\"joined\",\"worker\":7,\"step\":0,\"rejoin\":false,\"params_crc\":42}");
  EXPECT_EQ(JoinedEvent(8, 31, true, 42u),
            "{\"event\":\"joined\",\"worker\":8,\"step\":31,\"rejoin\":true,\"params_crc\":42}");
  EXPECT_EQ(ExpiredEvent(7, 30), "{\"event\":\"expired\",\"worker\":7,\"step\":30}");
  EXPECT_EQ(LeftEvent(8, 40, 15), "{\"event\":\"left\",\"worker\":8,\"step\":40,\"signal\":15}");
}

TEST(WorkerEventsTest, BlasKernelsEvent) {
  BlasAdvice a;
  a.core = "Prescott";
  a.wider = "SkylakeX";
  a.vectors = "AVX-512";
  EXPECT_EQ(BlasKernelsEvent(a),
            "{\"event\":\"blas_kernels\",\"core\":\"Prescott\",\"wider\":\"SkylakeX\","
            "\"vectors\":\"AVX-512\"}");
}

TEST(WorkerEventsTest, MetricsEvent) {
  EXPECT_EQ(MetricsEvent("127.0.0.1:41234", 41234),
            "{\"event\":\"metrics\",\"address\":\"127.0.0.1:41234\",\"port\":41234}");
  EXPECT_EQ(MetricsEvent("[::1]:9420", 9420),
            "{\"event\":\"metrics\",\"address\":\"[::1]:9420\",\"port\":9420}");
}

TEST(WorkerEventsTest, ParamsCrcIsZlibsCrc32OfTheBytes) {
  const std::vector<float> params{1.0f, -2.5f, 0.0f, 3.25e-7f, 1e30f};
  unsigned char bytes[5 * sizeof(float)];
  std::memcpy(bytes, params.data(), sizeof(bytes));
  const uLong expected = crc32(crc32(0L, Z_NULL, 0), bytes, sizeof(bytes));
  EXPECT_EQ(ParamsCrc(params), static_cast<uint32_t>(expected));
  // Equal copies, equal CRCs; one changed element, another CRC.
  std::vector<float> copy = params;
  EXPECT_EQ(ParamsCrc(copy), ParamsCrc(params));
  copy[3] = 3.5e-7f;
  EXPECT_NE(ParamsCrc(copy), ParamsCrc(params));
  // No parameters: the CRC of no bytes.
  EXPECT_EQ(ParamsCrc(std::vector<float>{}), 0u);
}

}  // namespace
}  // namespace loco
