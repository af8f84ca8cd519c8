// The calibration file (every double read back bit for bit, every malformed
// line refused with its number), the measured-runs CSV, and the fit: runs
// predicted by known constants are fitted back to the same predictions.
#include "plan/calibration.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "plan/calibration_fit.h"
#include "plan/cost_model.h"
#include "plan/measured_runs.h"

namespace loco::plan {
namespace {

Calibration Awkward() {
  Calibration c;
  c.worker_s_per_param_sample = 1.0 / 3.0 * 1e-10;
  c.worker_s_per_element = 0.1;
  c.server_s_per_element_payload = 2.2250738585072014e-308;
  c.server_s_per_element = 1e-7;
  c.cpu_s_per_byte = 9.8510225851995941e-10;
  c.cpu_s_per_message = 0;
  c.step_overhead_s = 123456.78901234567;
  c.link_efficiency = 0.95550812327832901;
  c.server_fixed_bytes = 21966111.563523453;
  c.server_bytes_per_element = 13.789170841373494;
  c.server_delta_bytes_per_element = 3.3471920002367797;
  c.server_push_held_fraction = 1;
  c.server_cpu_s_per_byte = 1.4922183010406537e-09;
  c.server_cpu_s_per_fp32_byte = 7.0000000000000007e-10;
  c.server_cpu_s_per_stream_s = 0.20833333333333334;
  c.server_cpu_s_per_message = 0;
  c.server_cpu_s_per_element_payload = 4.9406564584124654e-324;
  c.server_cpu_s_per_element = 1.5e-9;
  c.server_cpu_runs = 18;
  c.server_cpu_rms_relative_error = 0.07;
  c.source = "bench/plan/measured.csv";
  c.runs = 36;
  c.rms_relative_error = 0.11053126251813462;
  return c;
}

TEST(CalibrationTest, FileRoundTripsEveryDoubleExactly) {
  const Calibration c = Awkward();
  StatusOr<Calibration> back = ParseCalibration(FormatCalibration(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::memcmp(&back->worker_s_per_param_sample, &c.worker_s_per_param_sample,
                        sizeof(double)), 0);
  EXPECT_EQ(back->worker_s_per_element, c.worker_s_per_element);
  EXPECT_EQ(back->server_s_per_element_payload, c.server_s_per_element_payload);
  EXPECT_EQ(back->server_s_per_element, c.server_s_per_element);
  EXPECT_EQ(back->cpu_s_per_byte, c.cpu_s_per_byte);
  EXPECT_EQ(back->cpu_s_per_message, c.cpu_s_per_message);
  EXPECT_EQ(back->step_overhead_s, c.step_overhead_s);
  EXPECT_EQ(back->link_efficiency, c.link_efficiency);
  EXPECT_EQ(back->server_fixed_bytes, c.server_fixed_bytes);
  EXPECT_EQ(back->server_bytes_per_element, c.server_bytes_per_element);
  EXPECT_EQ(back->server_delta_bytes_per_element, c.server_delta_bytes_per_element);
  EXPECT_EQ(back->server_push_held_fraction, c.server_push_held_fraction);
  EXPECT_EQ(back->rms_relative_error, c.rms_relative_error);
  EXPECT_EQ(back->server_cpu_s_per_byte, c.server_cpu_s_per_byte);
  EXPECT_EQ(back->server_cpu_s_per_fp32_byte, c.server_cpu_s_per_fp32_byte);
  EXPECT_EQ(back->server_cpu_s_per_stream_s, c.server_cpu_s_per_stream_s);
  EXPECT_EQ(back->server_cpu_s_per_message, c.server_cpu_s_per_message);
  EXPECT_EQ(back->server_cpu_s_per_element_payload, c.server_cpu_s_per_element_payload);
  EXPECT_EQ(back->server_cpu_s_per_element, c.server_cpu_s_per_element);
  EXPECT_EQ(back->server_cpu_runs, c.server_cpu_runs);
  EXPECT_EQ(back->server_cpu_rms_relative_error, c.server_cpu_rms_relative_error);
  EXPECT_EQ(back->source, c.source);
  EXPECT_EQ(back->runs, c.runs);
  EXPECT_EQ(FormatCalibration(*back), FormatCalibration(c));
}

TEST(CalibrationTest, FileWrittenAndReadBack) {
  const std::string path = std::string(::testing::TempDir()) + "/calibration." +
                           std::to_string(::getpid()) + ".txt";
  ASSERT_TRUE(WriteCalibrationFile(path, Awkward()).ok());
  StatusOr<Calibration> back = ReadCalibrationFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(FormatCalibration(*back), FormatCalibration(Awkward()));
  ::unlink(path.c_str());
  StatusOr<Calibration> gone = ReadCalibrationFile(path);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find(path), std::string::npos);
}

// Each edit of a good file, and the words its refusal must contain.
TEST(CalibrationTest, RefusesMalformedFilesNamingTheProblem) {
  const std::string good = FormatCalibration(Awkward());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {replaced("cpu_s_per_message=0\n", ""), "'cpu_s_per_message' is missing"},
      {good + "bogus=1\n", "unknown key 'bogus'"},
      {good + "runs=3\n", "repeats"},
      {replaced("cpu_s_per_message=0", "cpu_s_per_message=-1"), "not a finite number >= 0"},
      {replaced("cpu_s_per_message=0", "cpu_s_per_message=nan"), "not a finite number >= 0"},
      {replaced("cpu_s_per_message=0", "cpu_s_per_message=1x"), "not a finite number >= 0"},
      {replaced("cpu_s_per_message=0", "cpu_s_per_message=1e999"), "not a finite number >= 0"},
      {replaced("link_efficiency=0.95550812327832901", "link_efficiency=1.5"), "(0, 1]"},
      {replaced("runs=36", "runs=3.5"), "whole number"},
      {good + "just words\n", "not key=value"},
  };
  for (const auto& [text, words] : cases) {
    StatusOr<Calibration> c = ParseCalibration(text);
    ASSERT_FALSE(c.ok()) << words;
    EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status().message();
  }
}

// A file without the server CPU model's keys (written before it existed)
// reads with the step model's stand-in; one with only some of them does not.
TEST(CalibrationTest, ReadsAFileWithoutTheServerCpuModel) {
  std::string text;
  std::string partial;
  const std::string good = FormatCalibration(Awkward());
  for (size_t at = 0, next; at < good.size(); at = next + 1) {
    next = good.find('\n', at);
    const std::string line = good.substr(at, next - at + 1);
    if (line.rfind("server_cpu_", 0) != 0) text += line;
    if (line.rfind("server_cpu_runs=", 0) != 0) partial += line;
  }
  StatusOr<Calibration> old = ParseCalibration(text);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->server_cpu_runs, 0u);
  EXPECT_EQ(old->server_cpu_s_per_byte, 0.0);
  EXPECT_EQ(old->cpu_s_per_byte, Awkward().cpu_s_per_byte);
  StatusOr<Calibration> some = ParseCalibration(partial);
  ASSERT_FALSE(some.ok());
  EXPECT_NE(some.status().message().find("'server_cpu_runs' is missing"), std::string::npos)
      << some.status().message();
}

TEST(MeasuredRunsTest, ReadsTheColumnsByName) {
  const std::string csv =
      "label,params,workers,servers,batch_per_worker,link_mbit,codec,bits,block,pull_codec,"
      "pull_bits,pull_block,host_cores,step_s,server_rss_mb,extra\n"
      "a,11882506,4,2,64,1000,loco,4,256,delta,8,128,2,0.248,131.5,x\n"
      "b,1863690,8,4,32,10000,fp32,,,bf16,,,2,0.05,,y\n";
  StatusOr<std::vector<MeasuredRun>> runs = ParseMeasuredRuns(csv);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 2u);
  const MeasuredRun& a = (*runs)[0];
  EXPECT_EQ(a.spec.params, 11882506u);
  EXPECT_EQ(a.spec.push.bits, 4);
  EXPECT_EQ(a.spec.pull.block_size, 128);
  EXPECT_DOUBLE_EQ(a.spec.worker_link_gbps, 1.0);
  EXPECT_DOUBLE_EQ(a.spec.server_link_gbps, 2.0);  // 4 worker links shared by 2 servers
  EXPECT_EQ(a.spec.shared_cores, 2u);
  EXPECT_DOUBLE_EQ(a.server_rss_bytes, 131.5 * 1024 * 1024);
  EXPECT_EQ((*runs)[1].spec.push.codec, WireCodec::kFp32);
  EXPECT_EQ((*runs)[1].server_rss_bytes, 0.0);
  // No server_cpu_s column: not measured.
  EXPECT_EQ(a.server_cpu_s, 0.0);
}

TEST(MeasuredRunsTest, ReadsTheServerCpuWhereItWasMeasured) {
  const std::string header =
      "label,params,workers,servers,batch_per_worker,link_mbit,codec,bits,block,pull_codec,"
      "pull_bits,pull_block,host_cores,step_s,server_rss_mb,set,server_cpu_s\n";
  StatusOr<std::vector<MeasuredRun>> runs = ParseMeasuredRuns(
      header + "a,11882506,4,2,64,1000,loco,4,256,delta,8,128,2,0.248,131.5,steps,0.02711\n"
               "b,1863690,8,4,32,10000,fp32,,,bf16,,,2,0.05,,steps,\n");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_DOUBLE_EQ((*runs)[0].server_cpu_s, 0.02711);
  EXPECT_EQ((*runs)[1].server_cpu_s, 0.0);
  StatusOr<std::vector<MeasuredRun>> bad = ParseMeasuredRuns(
      header + "a,11882506,4,2,64,1000,loco,4,256,delta,8,128,2,0.248,131.5,steps,-1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2, column server_cpu_s"), std::string::npos)
      << bad.status().message();
}

TEST(MeasuredRunsTest, RefusesABadValueNamingLineAndColumn) {
  StatusOr<std::vector<MeasuredRun>> runs = ParseMeasuredRuns(
      "label,params,workers,servers,batch_per_worker,link_mbit,codec,bits,block,pull_codec,"
      "pull_bits,pull_block,host_cores,step_s,server_rss_mb\n"
      "a,11882506,four,2,64,1000,loco,4,256,delta,8,128,2,0.248,\n");
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.status().message().find("line 2, column workers"), std::string::npos)
      << runs.status().message();
  EXPECT_FALSE(ParseMeasuredRuns("label,params\na,5\n").ok());
  EXPECT_FALSE(ParseMeasuredRuns("").ok());
}

// Runs whose "measured" steps are the model's own predictions under known
// constants: the fit must reproduce those steps (the constants themselves
// need not be unique).
TEST(CalibrationFitTest, RecoversStepsGeneratedByTheModel) {
  Calibration truth;
  truth.worker_s_per_param_sample = 3e-11;
  truth.worker_s_per_element = 1e-9;
  truth.server_s_per_element_payload = 4e-10;
  truth.server_s_per_element = 3e-9;
  truth.cpu_s_per_byte = 8e-10;
  truth.cpu_s_per_message = 3e-4;
  truth.step_overhead_s = 2e-3;
  truth.link_efficiency = 0.95;
  std::vector<MeasuredRun> runs;
  for (uint64_t params : {2'000'000u, 6'000'000u, 12'000'000u}) {
    for (uint32_t workers : {1u, 4u, 8u}) {
      for (double gbps : {0.3, 1.0, 10.0}) {
        MeasuredRun r;
        r.spec.params = params;
        r.spec.workers = workers;
        r.spec.shards = 1 + workers % 3;
        r.spec.batch_per_gpu = 256 / workers;
        r.spec.worker_link_gbps = gbps;
        r.spec.server_link_gbps = gbps * workers / r.spec.shards;
        r.spec.shared_cores = 2;
        r.step_s = Predict(r.spec, truth)->step_s;
        runs.push_back(r);
      }
    }
  }
  StatusOr<Calibration> fit = FitCalibration(runs, "synthetic");
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_LT(fit->rms_relative_error, 0.03);
  EXPECT_EQ(fit->runs, runs.size());
  EXPECT_FALSE(FitCalibration({runs.begin(), runs.begin() + 3}, "few").ok());
  // No run measured the server's CPU: the step model's constants stand in,
  // as the update phase and the transfers spend them.
  EXPECT_EQ(fit->server_cpu_runs, 0u);
  const StatusOr<Prediction> predicted = Predict(runs[4].spec, *fit);
  ASSERT_TRUE(predicted.ok()) << predicted.status().ToString();
  const Prediction& p = predicted.value();
  const ServerCpuTerms t = ServerCpuTermsOf(runs[4].spec, p);
  EXPECT_DOUBLE_EQ(p.server_cpu_s,
                   fit->cpu_s_per_byte * t.bytes + fit->cpu_s_per_message * t.messages +
                       fit->server_s_per_element_payload * t.payload_elements +
                       fit->server_s_per_element * t.elements);
}

// Runs whose server CPU is the server CPU model's under known constants
// (every term, the per-stream-second and per-fp32-byte ones included): the fit reproduces
// each run's CPU, and a run it was not fitted to; with fewer measured runs
// than constants it does not fit them.
TEST(CalibrationFitTest, RecoversServerCpuGeneratedByItsModel) {
  Calibration truth;
  truth.worker_s_per_param_sample = 3e-11;
  truth.cpu_s_per_byte = 8e-10;
  truth.link_efficiency = 0.95;
  truth.server_cpu_runs = 1;  // the fitted model, not the stand-in
  truth.server_cpu_s_per_byte = 1.5e-9;
  truth.server_cpu_s_per_fp32_byte = 9e-10;
  truth.server_cpu_s_per_stream_s = 0.2;
  truth.server_cpu_s_per_message = 2e-4;
  truth.server_cpu_s_per_element_payload = 5e-10;
  truth.server_cpu_s_per_element = 2e-9;
  auto run_of = [&](uint64_t params, uint32_t workers, uint32_t shards, double gbps,
                    WireCodec codec) {
    MeasuredRun r;
    r.spec.params = params;
    r.spec.workers = workers;
    r.spec.shards = shards;
    r.spec.batch_per_gpu = 256 / workers;
    r.spec.worker_link_gbps = gbps;
    r.spec.server_link_gbps = gbps * workers / shards;
    r.spec.shared_cores = 2;
    r.spec.push.codec = codec;
    r.step_s = Predict(r.spec, truth)->step_s;
    r.server_cpu_s = Predict(r.spec, truth)->server_cpu_s;
    return r;
  };
  std::vector<MeasuredRun> runs;
  for (uint64_t params : {2'000'000u, 12'000'000u}) {
    for (uint32_t workers : {1u, 4u, 8u}) {
      for (double gbps : {0.3, 10.0}) {
        for (WireCodec codec : {WireCodec::kBlockQuant, WireCodec::kFp32, WireCodec::kBf16}) {
          runs.push_back(run_of(params, workers, 1 + workers % 3, gbps, codec));
        }
      }
    }
  }
  StatusOr<Calibration> fit = FitCalibration(runs, "synthetic");
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_EQ(fit->server_cpu_runs, runs.size());
  EXPECT_LT(fit->server_cpu_rms_relative_error, 1e-6);
  // Unseen: another size, W, S and link, and 8-bit codes (another ratio
  // of bytes to elements than any fitted run's).
  MeasuredRun unseen = run_of(6'000'000u, 5, 3, 2.5, WireCodec::kBlockQuant);
  unseen.spec.push.bits = 8;
  unseen.server_cpu_s = Predict(unseen.spec, truth)->server_cpu_s;
  EXPECT_NEAR(Predict(unseen.spec, *fit)->server_cpu_s, unseen.server_cpu_s,
              1e-6 * unseen.server_cpu_s);

  std::vector<MeasuredRun> few = runs;
  for (size_t k = 5; k < few.size(); ++k) few[k].server_cpu_s = 0;
  StatusOr<Calibration> stand_in = FitCalibration(few, "five measured");
  ASSERT_TRUE(stand_in.ok());
  EXPECT_EQ(stand_in->server_cpu_runs, 0u);
  EXPECT_EQ(stand_in->server_cpu_s_per_stream_s, 0.0);
}

}  // namespace
}  // namespace loco::plan
