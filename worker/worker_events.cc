#include "worker/worker_events.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/format_double.h"

namespace loco {
namespace {

std::string Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string JsonNumber(double x) {
  if (!std::isfinite(x)) return "null";
  return FormatDouble(x);  // round-trip: the launcher reads these numbers back
}

std::string TrafficFields(const TrafficStats& t) {
  return "\"push_wire_bytes\":" + std::to_string(t.push_wire_bytes) +
         ",\"push_fp32_bytes\":" + std::to_string(t.push_fp32_bytes) +
         ",\"pull_wire_bytes\":" + std::to_string(t.pull_wire_bytes) +
         ",\"pull_fp32_bytes\":" + std::to_string(t.pull_fp32_bytes);
}

uint32_t ParamsCrc(std::span<const float> params) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(params.data());
  size_t n = params.size_bytes();
  // zlib takes a uInt length: at most 1 GiB per call.
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string StepEvent(const StepEventFields& f) {
  const std::string crc =
      f.params_crc ? ",\"params_crc\":" + std::to_string(*f.params_crc) : "";
  return "{\"event\":\"step\",\"worker\":" + std::to_string(f.worker) +
         ",\"rank\":" + std::to_string(f.rank) + ",\"world\":" + std::to_string(f.world) +
         ",\"step\":" + std::to_string(f.step) + ",\"loss\":" + JsonNumber(f.loss) +
         ",\"samples_per_s\":" + JsonNumber(f.samples_per_s) + "," + TrafficFields(f.traffic) +
         ",\"resynced\":" + Bool(f.resynced) + crc +
         ",\"nonfinite\":" + std::to_string(f.nonfinite) + ",\"step_s\":" + JsonNumber(f.step_s) +
         ",\"compute_s\":" + JsonNumber(f.compute_s) + "}";
}

std::string EvalEvent(uint64_t worker, uint64_t step, uint64_t epoch, double test_accuracy,
                      double test_loss) {
  return "{\"event\":\"eval\",\"worker\":" + std::to_string(worker) +
         ",\"step\":" + std::to_string(step) + ",\"epoch\":" + std::to_string(epoch) +
         ",\"test_accuracy\":" + JsonNumber(test_accuracy) +
         ",\"test_loss\":" + JsonNumber(test_loss) + "}";
}

std::string DoneEvent(uint64_t worker, uint64_t steps, std::optional<double> test_accuracy,
                      uint32_t params_crc, double wall_s, const TrafficStats& traffic) {
  const std::string accuracy =
      test_accuracy ? ",\"test_accuracy\":" + JsonNumber(*test_accuracy) : "";
  return "{\"event\":\"done\",\"worker\":" + std::to_string(worker) +
         ",\"steps\":" + std::to_string(steps) + accuracy +
         ",\"params_crc\":" + std::to_string(params_crc) + ",\"wall_s\":" + JsonNumber(wall_s) +
         "," + TrafficFields(traffic) + "}";
}

std::string WaitingEvent(int64_t join_at_step) {
  return "{\"event\":\"waiting\",\"join_at_step\":" + std::to_string(join_at_step) + "}";
}

std::string JoinedEvent(uint64_t worker, uint64_t step, bool rejoin, uint32_t params_crc) {
  return "{\"event\":\"joined\",\"worker\":" + std::to_string(worker) +
         ",\"step\":" + std::to_string(step) + ",\"rejoin\":" + Bool(rejoin) +
         ",\"params_crc\":" + std::to_string(params_crc) + "}";
}

std::string ExpiredEvent(uint64_t worker, uint64_t step) {
  return "{\"event\":\"expired\",\"worker\":" + std::to_string(worker) +
         ",\"step\":" + std::to_string(step) + "}";
}

std::string LeftEvent(uint64_t worker, uint64_t step, int signal) {
  return "{\"event\":\"left\",\"worker\":" + std::to_string(worker) +
         ",\"step\":" + std::to_string(step) + ",\"signal\":" + std::to_string(signal) + "}";
}

std::string BlasKernelsEvent(const BlasAdvice& advice) {
  return "{\"event\":\"blas_kernels\",\"core\":\"" + advice.core + "\",\"wider\":\"" +
         advice.wider + "\",\"vectors\":\"" + advice.vectors + "\"}";
}

std::string MetricsEvent(const std::string& address, int port) {
  return "{\"event\":\"metrics\",\"address\":\"" + address + "\",\"port\":" + std::to_string(port) +
         "}";
}

void EmitEvent(const std::string& json) {
  const std::string line = json + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace loco
