// deploy/: the Prometheus configurations and alerting rules pass promtool
// (check config, check rules, test rules), a live scrape of every process
// passes `promtool check metrics`, and every metric name that the Grafana
// dashboard, the alerting rules and their unit tests mention is one the
// service really exports. Skipped (with the reason) when promtool is not
// installed; scripts/install-deps.sh installs it (Debian package prometheus).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/metrics/metrics_cluster.h"

namespace loco::test {
namespace {

const std::string kDeploy = std::string(LOCO_SOURCE_DIR) + "/deploy";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` through /bin/sh; bounded by the command itself (promtool
// checks are local and finish in well under a second).
CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// $LOCO_PROMTOOL, else promtool on the PATH; empty when there is none.
std::string Promtool() {
  if (const char* env = std::getenv("LOCO_PROMTOOL"); env && *env) return env;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/promtool";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

#define REQUIRE_PROMTOOL(var)                                                        \
  const std::string var = Promtool();                                                \
  if (var.empty()) {                                                                 \
    GTEST_SKIP() << "promtool not found (install Debian's prometheus package, or set " \
                    "LOCO_PROMTOOL)";                                                \
  }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every loco_* identifier in `text` (metric names; the files name nothing
// else in that form).
std::set<std::string> ReferencedMetrics(const std::string& text) {
  std::set<std::string> names;
  static const std::regex kName(R"((^|[^A-Za-z0-9_:])(loco_[a-z0-9_]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName);
       it != std::sregex_iterator(); ++it) {
    names.insert((*it)[2].str());
  }
  return names;
}

// The referenced names that `exported` does not hold.
std::set<std::string> Missing(const std::set<std::string>& referenced,
                              const std::set<std::string>& exported) {
  std::set<std::string> missing;
  for (const auto& n : referenced) {
    if (!exported.count(n)) missing.insert(n);
  }
  return missing;
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// One small trained cluster, scraped once, shared by the live-scrape tests.
class LiveScrapeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    MetricsClusterOptions o;
    o.shards = 2;
    o.workers = 2;
    cluster_ = new MetricsCluster(o);
    ASSERT_TRUE(cluster_->Start());
    ASSERT_TRUE(cluster_->Train(3, [](size_t w, uint64_t t) {
      std::vector<float> g(cluster_->options().elements);
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * float((i + w + t) % 13) - 0.06f;
      return g;
    }));
    // One refused call per shard, so that the rejection counter has a series
    // (a counter family with no labelled series is not exported at all).
    for (size_t k = 0; k < o.shards; ++k) {
      auto stub = v1::ParameterServer::NewStub(grpc::CreateChannel(
          cluster_->server(k).address(), grpc::InsecureChannelCredentials()));
      v1::PullRequest bad;
      bad.set_shard_id(1000);  // no such shard
      v1::PullResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      ASSERT_FALSE(stub->Pull(&ctx, bad, &resp).ok());
    }
    auto texts = cluster_->ScrapeTexts();
    ASSERT_TRUE(texts.ok()) << texts.status().ToString();
    texts_ = new std::vector<std::string>(std::move(texts).value());
  }
  static void TearDownTestSuite() {
    delete texts_;
    delete cluster_;
    texts_ = nullptr;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(texts_, nullptr) << "the cluster did not start"; }

  static std::set<std::string> ExportedNames() {
    std::set<std::string> names;
    for (const auto& t : *texts_) {
      auto parsed = PromText::Parse(t);
      EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
      if (parsed.ok()) names.merge(parsed->Names());
    }
    return names;
  }

  static MetricsCluster* cluster_;
  static std::vector<std::string>* texts_;
};
MetricsCluster* LiveScrapeTest::cluster_ = nullptr;
std::vector<std::string>* LiveScrapeTest::texts_ = nullptr;

TEST(PromtoolTest, LocalScrapeConfigIsValid) {
  REQUIRE_PROMTOOL(promtool);
  const auto r = RunCommand(promtool + " check config " + kDeploy + "/prometheus/prometheus.yml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(PromtoolTest, KubernetesScrapeConfigIsValid) {
  REQUIRE_PROMTOOL(promtool);
  const auto r =
      RunCommand(promtool + " check config " + kDeploy + "/prometheus/prometheus-kubernetes.yml");
  if (r.exit_code != 0 &&
      r.output.find("field kubernetes_sd_configs not found") != std::string::npos) {
    GTEST_SKIP() << "this promtool was built without Kubernetes service discovery (Debian's "
                    "is); validate with an upstream promtool:\n"
                 << r.output;
  }
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(PromtoolTest, AlertRulesAreValid) {
  REQUIRE_PROMTOOL(promtool);
  const auto r = RunCommand(promtool + " check rules " + kDeploy + "/prometheus/rules/loco-alerts.yml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("SUCCESS: 5 rules found"), std::string::npos) << r.output;
}

TEST(PromtoolTest, AlertRuleUnitTestsPass) {
  REQUIRE_PROMTOOL(promtool);
  const auto r = RunCommand(promtool + " test rules " + kDeploy + "/prometheus/tests/loco-alerts.test.yml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(LiveScrapeTest, EveryEndpointPassesPromtoolCheckMetrics) {
  REQUIRE_PROMTOOL(promtool);
  char dir_template[] = "/tmp/loco-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  for (size_t i = 0; i < texts_->size(); ++i) {
    const std::string file = dir + "/scrape-" + std::to_string(i) + ".txt";
    std::ofstream(file) << (*texts_)[i];
    const auto r = RunCommand(promtool + " check metrics < " + file);
    EXPECT_EQ(r.exit_code, 0) << "endpoint " << i << ":\n" << r.output;
    EXPECT_EQ(r.output, "") << "endpoint " << i << " has lint findings:\n" << r.output;
    std::remove(file.c_str());
  }
  rmdir(dir.c_str());
}

TEST_F(LiveScrapeTest, DashboardAndAlertsReferenceOnlyExportedMetrics) {
  const std::set<std::string> exported = ExportedNames();
  // Negative control: the check can fail.
  EXPECT_EQ(Missing(ReferencedMetrics("rate(loco_not_exported_total[5m])"), exported),
            std::set<std::string>{"loco_not_exported_total"});

  const std::set<std::string> dashboard =
      ReferencedMetrics(ReadFile(kDeploy + "/grafana/loco-ps-dashboard.json"));
  EXPECT_TRUE(Missing(dashboard, exported).empty())
      << "dashboard queries name metrics nobody exports: " << Join(Missing(dashboard, exported));
  // The panels the dashboard exists for (bandwidth saved, step time,
  // membership, loss, error state).
  for (const char* needed :
       {"loco_server_wire_bytes_total", "loco_server_fp32_bytes_total",
        "loco_server_step_duration_seconds_bucket", "loco_worker_step_duration_seconds_bucket",
        "loco_coordinator_active_workers", "loco_coordinator_membership_changes_total",
        "loco_worker_loss", "loco_worker_error_state_norm"}) {
    EXPECT_TRUE(dashboard.count(needed)) << "the dashboard has no query on " << needed;
  }

  for (const char* file : {"/prometheus/rules/loco-alerts.yml",
                           "/prometheus/tests/loco-alerts.test.yml"}) {
    const std::set<std::string> names = ReferencedMetrics(ReadFile(kDeploy + file));
    EXPECT_GE(names.size(), 5u) << file;
    EXPECT_TRUE(Missing(names, exported).empty())
        << file << " names metrics nobody exports: " << Join(Missing(names, exported));
  }
}

}  // namespace
}  // namespace loco::test
