// The process's memory on /metrics: the /proc/self/status parser against
// fixed texts, the live gauges against what the kernel reports around an
// allocation the test touches, scraped over HTTP, and the heap gauges
// against allocations and frees of known sizes.
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

TEST(ProcessMemoryTest, HeapInUseFollowsAllocationsAndFreedChunksAreCountedFree) {
  auto start = ReadHeapUsage();
  if (!start.ok() && start.status().code() == StatusCode::kUnimplemented) {
    GTEST_SKIP() << start.status().ToString();
  }
  ASSERT_TRUE(start.ok()) << start.status().ToString();

  // One large block (mmapped by the allocator) counts as in use while held.
  constexpr size_t kLarge = size_t{48} << 20;
  auto large = std::make_unique<char[]>(kLarge);
  std::memset(large.get(), 1, kLarge);
  auto holding = ReadHeapUsage();
  ASSERT_TRUE(holding.ok());
  EXPECT_GE(holding->in_use_bytes, start->in_use_bytes + kLarge);
  large.reset();
  auto released = ReadHeapUsage();
  ASSERT_TRUE(released.ok());
  EXPECT_LT(released->in_use_bytes, holding->in_use_bytes - kLarge / 2);

  // Small chunks freed below a chunk still held stay in the arena as free
  // bytes (the allocator cannot give them back to the kernel past the held
  // one). 4 KiB chunks are above every per-thread cache's size class.
  constexpr size_t kChunk = 4096, kChunks = 512;
  std::vector<std::unique_ptr<char[]>> chunks;
  for (size_t i = 0; i < kChunks; ++i) chunks.push_back(std::make_unique<char[]>(kChunk));
  auto guard = std::make_unique<char[]>(kChunk);
  auto before_free = ReadHeapUsage();
  ASSERT_TRUE(before_free.ok());
  chunks.clear();
  auto after_free = ReadHeapUsage();
  ASSERT_TRUE(after_free.ok());
  EXPECT_GE(after_free->free_bytes, before_free->free_bytes + kChunk * kChunks / 2);
  EXPECT_LE(after_free->in_use_bytes, before_free->in_use_bytes - kChunk * kChunks / 2);
  EXPECT_NE(guard.get(), nullptr);
}

TEST(ProcessMemoryTest, ScrapeCarriesTheHeapGauges) {
  if (!ReadHeapUsage().ok()) GTEST_SKIP() << "no heap accounting in this C library";
  auto registry = std::make_shared<prometheus::Registry>();
  auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  constexpr size_t kHeld = size_t{24} << 20;
  auto held = std::make_unique<char[]>(kHeld);
  auto body = HttpGet("127.0.0.1", (*endpoint)->port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  auto parsed = PromText::Parse(*body);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->types().at("loco_process_heap_in_use_bytes"), "gauge");
  EXPECT_EQ(parsed->types().at("loco_process_heap_free_bytes"), "gauge");
  EXPECT_GE(parsed->Sum("loco_process_heap_in_use_bytes"), static_cast<double>(kHeld));
  EXPECT_GE(parsed->Sum("loco_process_heap_free_bytes"), 0.0);
  held[0] = 1;
  EXPECT_EQ(held[0], 1);
}

}  // namespace
}  // namespace loco::test
