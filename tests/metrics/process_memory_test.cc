// The process's memory on /metrics: the /proc/self/status parser against
// fixed texts, and the live gauges against what the kernel reports around
// an allocation the test touches, scraped over HTTP.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "metrics/metrics_endpoint.h"
#include "metrics/process_memory.h"
#include "tests/metrics/http_get.h"
#include "tests/metrics/prom_text.h"

namespace loco::test {
namespace {

TEST(ProcessMemoryTest, ParsesResidentAndPeakInBytesAndRefusesMalformedStatus) {
  const std::string status =
      "Name:\tloco-server\nVmPeak:\t  900000 kB\nVmHWM:\t  135540 kB\nVmRSS:\t  132264 kB\n";
  auto m = ParseProcStatus(status);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->resident_bytes, 132264ull * 1024);
  EXPECT_EQ(m->peak_resident_bytes, 135540ull * 1024);

  auto no_rss = ParseProcStatus("VmHWM:\t 10 kB\n");
  ASSERT_FALSE(no_rss.ok());
  EXPECT_EQ(no_rss.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_rss.status().message().find("VmRSS"), std::string::npos);
  auto bad_unit = ParseProcStatus("VmRSS:\t 10 MB\nVmHWM:\t 10 kB\n");
  ASSERT_FALSE(bad_unit.ok());
  EXPECT_NE(bad_unit.status().message().find("kB"), std::string::npos);
}

TEST(ProcessMemoryTest, ScrapedGaugesFollowTouchedMemory) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  const auto scrape = [&] {
    auto body = HttpGet("127.0.0.1", (*endpoint)->port(), "/metrics");
    EXPECT_TRUE(body.ok()) << body.status().ToString();
    auto parsed = PromText::Parse(body.ok() ? *body : std::string());
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    return parsed.ok() ? *parsed : PromText();
  };
  const PromText before = scrape();
  EXPECT_EQ(before.types().at("process_resident_memory_bytes"), "gauge");
  const double rss_before = before.Sum("process_resident_memory_bytes");
  EXPECT_GT(rss_before, 1e6);

  constexpr size_t kTouched = size_t{64} << 20;
  std::vector<char> block(kTouched);
  std::memset(block.data(), 1, block.size());  // resident, not just reserved
  const PromText after = scrape();
  const double rss_after = after.Sum("process_resident_memory_bytes");
  const double peak_after = after.Sum("loco_process_peak_resident_memory_bytes");
  EXPECT_GE(rss_after - rss_before, 0.9 * kTouched);
  EXPECT_GE(peak_after, rss_after);
  auto direct = ReadProcessMemory();
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_NEAR(rss_after, static_cast<double>(direct->resident_bytes), 16.0 * (1 << 20));
  EXPECT_EQ(block[kTouched - 1], 1);
}

}  // namespace
}  // namespace loco::test
