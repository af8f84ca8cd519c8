// MetricsEndpoint over real HTTP on loopback, and the exposition parser the
// other metrics tests rely on.
#include "metrics/metrics_endpoint.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <pthread.h>

#include <atomic>
#include <chrono>

#include "metrics/metric_conventions.h"
#include "metrics/metrics_endpoint_flags.h"
#include "metrics/metrics_text.h"
#include "metrics/thread_stack_floor.h"
#include "tests/metrics/http_get.h"
#include "tests/metrics/prom_text.h"

namespace loco::test {
namespace {

// --metrics-port: 0 is off, -1 any free port (bound and then read back from
// the endpoint), a number that port; below -1 is refused saying the range.
TEST(MetricsEndpointFlagsTest, ZeroIsOffMinusOneIsAnyFreePortAndLessIsRefused) {
  const auto parsed = [](const std::string& value, Status* status) {
    FlagSet flags("test");
    std::string host;
    int64_t port = 0;
    AddMetricsEndpointFlags(flags, &host, &port);
    bool help = false;
    *status = flags.Parse(
        {"--metrics-port=" + value}, [](const char*) -> const char* { return nullptr; }, &help);
    return MetricsEndpointOptionsFromFlags(host, port);
  };
  Status status;
  EXPECT_FALSE(parsed("0", &status).enabled);
  EXPECT_TRUE(status.ok()) << status.ToString();
  MetricsEndpointOptions fixed = parsed("9400", &status);
  EXPECT_TRUE(fixed.enabled);
  EXPECT_EQ(fixed.port, 9400);
  MetricsEndpointOptions any = parsed("-1", &status);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(any.enabled);
  EXPECT_EQ(any.host, "127.0.0.1");
  auto endpoint = StartMetricsEndpointIfEnabled(any, std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  ASSERT_NE(*endpoint, nullptr);
  EXPECT_GT((*endpoint)->port(), 0);
  const auto scraped = HttpGet("127.0.0.1", (*endpoint)->port(), "/metrics");
  EXPECT_TRUE(scraped.ok()) << scraped.status().ToString();
  parsed("-2", &status);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("[-1, 65535]"), std::string::npos) << status.ToString();
}

// MetricsText (what loco_ps serves from Python) is what the endpoint
// serves: the registry's samples and the process's memory.
TEST(MetricsTextTest, HoldsTheRegistryAndTheProcessMemoryAsTheEndpointServesThem) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("loco_test_things_total")
      .Help("test")
      .Register(*registry)
      .Add({{"kind", "a"}})
      .Increment(3);
  const std::string text = MetricsText(*registry);
  EXPECT_NE(text.find("# TYPE loco_test_things_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("loco_test_things_total{kind=\"a\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("\nprocess_resident_memory_bytes "), std::string::npos) << text;
  auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  auto served = HttpGet("127.0.0.1", (*endpoint)->port(), "/metrics");
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  // Line by line the same, but for the memory gauges' values, which move,
  // and the exposer's own families (its scrapes and bytes), which only a
  // prometheus-cpp server has.
  const auto names = [](const std::string& body) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t end; (end = body.find('\n', start)) != std::string::npos; start = end + 1) {
      const std::string line = body.substr(start, end - start);
      if (line.find("exposer_") == std::string::npos)
        out.push_back(line.substr(0, line.rfind(' ')));
    }
    return out;
  };
  EXPECT_EQ(names(text), names(*served));
}

TEST(MetricsEndpointTest, ServesTheRegistryAndRunsTheHookBeforeEveryScrape) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& counter = prometheus::BuildCounter()
                      .Name("loco_test_things_total")
                      .Help("test")
                      .Register(*registry)
                      .Add({{"kind", "a"}});
  std::atomic<int> hooks{0};
  auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, registry, [&] { ++hooks; });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  ASSERT_GT((*endpoint)->port(), 0);
  EXPECT_EQ((*endpoint)->url(),
            "http://127.0.0.1:" + std::to_string((*endpoint)->port()) + "/metrics");

  for (int i = 1; i <= 3; ++i) {
    counter.Increment(2.5);
    auto body = HttpGet("127.0.0.1", (*endpoint)->port(), "/metrics");
    ASSERT_TRUE(body.ok()) << body.status().ToString();
    auto parsed = PromText::Parse(*body);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_DOUBLE_EQ(parsed->Sum("loco_test_things_total", {{"kind", "a"}}), 2.5 * i);
    EXPECT_EQ(parsed->types().at("loco_test_things_total"), "counter");
    EXPECT_EQ(hooks.load(), i);
  }
}

// Destroyed right after its start, an endpoint took civetweb's whole 2 s
// poll quantum to close (every test and every process exit that stopped
// one). The bound is a regression check with a wide margin (measured: a
// few ms), not a speed figure. After the close the port is free: a new
// endpoint binds it.
TEST(MetricsEndpointTest, ClosesWithoutWaitingForCivetwebsPoll) {
  auto registry = std::make_shared<prometheus::Registry>();
  for (int i = 0; i < 3; ++i) {
    auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0, registry);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
    const int port = (*endpoint)->port();
    ASSERT_TRUE(HttpGet("127.0.0.1", port, "/metrics").ok());
    const auto start = std::chrono::steady_clock::now();
    endpoint->reset();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
    EXPECT_FALSE(HttpGet("127.0.0.1", port, "/metrics").ok()) << "still serving on " << port;
    auto again = MetricsEndpoint::Start("127.0.0.1", port, registry);
    EXPECT_TRUE(again.ok()) << again.status().ToString();
  }
}

TEST(MetricsEndpointTest, RefusesBadAddressesWithAClearStatus) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto bad_port = MetricsEndpoint::Start("127.0.0.1", 70000, registry);
  ASSERT_FALSE(bad_port.ok());
  EXPECT_EQ(bad_port.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_port.status().message().find("70000"), std::string::npos);

  auto empty_host = MetricsEndpoint::Start("", 0, registry);
  ASSERT_FALSE(empty_host.ok());
  EXPECT_EQ(empty_host.status().code(), StatusCode::kInvalidArgument);

  auto first = MetricsEndpoint::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto clash = MetricsEndpoint::Start("127.0.0.1", (*first)->port(), registry);
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), StatusCode::kUnavailable);
}

// civetweb asks for 100 KiB stacks; the floor must reach it through libc's
// own entry point (the interposition), and leave larger requests alone.
size_t StackOfThreadCreatedWith(size_t requested) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  EXPECT_EQ(pthread_attr_setstacksize(&attr, requested), 0);
  size_t got = 0;
  pthread_t t;
  EXPECT_EQ(pthread_create(
                &t, &attr,
                [](void* out) -> void* {
                  pthread_attr_t self;
                  pthread_getattr_np(pthread_self(), &self);
                  pthread_attr_getstacksize(&self, static_cast<size_t*>(out));
                  pthread_attr_destroy(&self);
                  return nullptr;
                },
                &got),
            0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  return got;
}

TEST(ThreadStackFloorTest, SmallExplicitStacksAreRaisedLargeOnesKept) {
  EXPECT_GE(StackOfThreadCreatedWith(100 * 1024), kMinThreadStackBytes);
  EXPECT_GE(StackOfThreadCreatedWith(8 * kMinThreadStackBytes), 8 * kMinThreadStackBytes);
  EXPECT_EQ(FlooredStackSize(4 * kMinThreadStackBytes), 4 * kMinThreadStackBytes);
}

TEST(MetricsEndpointTest, ReasonLabelsAreLowerCaseStatusCodes) {
  EXPECT_EQ(ReasonLabel(StatusCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(ReasonLabel(StatusCode::kFailedPrecondition), "failed_precondition");
}

TEST(PromTextTest, ParsesSamplesLabelsAndTypes) {
  const std::string text =
      "# HELP x_total help text\n"
      "# TYPE x_total counter\n"
      "x_total{a=\"1\",b=\"p q\"} 3\n"
      "x_total{a=\"2\",b=\"p q\"} 4.5\n"
      "y 1e3 1700000000\n";
  auto p = PromText::Parse(text);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->Sum("x_total"), 7.5);
  EXPECT_DOUBLE_EQ(p->Sum("x_total", {{"a", "2"}}), 4.5);
  EXPECT_EQ(p->Count("x_total", {{"b", "p q"}}), 2u);
  EXPECT_DOUBLE_EQ(p->Sum("y"), 1000);
  EXPECT_EQ(p->Count("z"), 0u);
  EXPECT_FALSE(PromText::Parse("x{a=1} 2\n").ok());
  EXPECT_FALSE(PromText::Parse("x{a=\"1\"} two\n").ok());
}

}  // namespace
}  // namespace loco::test
