// The progress events of loco-worker: one JSON object per line on stdout,
// parsed by the launcher (the keys are a contract); logs go to stderr.
//   {"event":"step","worker":id,"rank":r,"world":w,"step":t,"loss":x,
//    "samples_per_s":y,"push_wire_bytes":…,"push_fp32_bytes":…,
//    "pull_wire_bytes":…,"pull_fp32_bytes":…,"resynced":b,"nonfinite":n,
//    "step_s":d,"compute_s":c}
//   {"event":"eval","worker":id,"step":t,"epoch":e,"test_accuracy":a,"test_loss":l}
//   {"event":"done","worker":id,"steps":n,["test_accuracy":a,]"params_crc":c,"wall_s":s,
//    four byte counts}
//   {"event":"waiting","join_at_step":n}  with --join-at-step: ready, waiting for step n
//   {"event":"joined","worker":id,"step":t,"rejoin":b,"params_crc":c}  after (re)joining
//     (with --join-at-step N, the first one comes once the cluster reached N;
//     t, its first step, may be a little past N: the cluster does not wait)
//   {"event":"expired","worker":id,"step":t}  removed by the coordinator; it rejoins
//   {"event":"left","worker":id,"step":t,"signal":n}  SIGTERM/SIGINT: left at once, exit 0
//   {"event":"blas_kernels","core":c,"wider":w,"vectors":v}  OpenBLAS runs narrower
//     kernels than the CPU offers (BlasAdvice); loco-launch shows it once
//   {"event":"metrics","address":"host:port","port":p}  with --metrics-port: the
//     /metrics endpoint is serving there (with -1, on the free port the system
//     picked; loco-launch's local Prometheus scrapes it from then on)
// "params_crc" is the CRC-32 of the fp32 parameters (the copy the worker holds
// then; in step events with --report-params-crc, the copy the gradient was
// computed at), so that copies can be compared across workers and servers.
// "step" is the global step the gradient was computed at; "samples_per_s" is
// this worker's own samples per second over the report window; byte counts
// are cumulative (client/worker_stats.h); "step_s" and "compute_s" are the
// duration of the step just completed and its gradient computation's part
// (StepResult); "steps" in "done" is the global step the worker reached.
//
// With --local-devices N the process is one node of N local ranks (threads,
// worker/group/local_group_runner.h; they reduce through the CPU group or, on CUDA
// devices, NCCL: --local-group): it is ONE worker of the cluster, the events
// describe the node ("loss" is the mean over its N·b samples, weighted by
// each rank's samples; "samples_per_s" counts them all).
//
// The *Event functions build one line's text (without the newline) and do
// no I/O; EmitEvent writes it. Numbers are written with round-trip precision and integers in
// full, so that the same values give the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/blas_advice.h"
#include "client/worker_stats.h"

namespace loco {

// x as the shortest text that parses back to x (FormatDouble), or null
// when it is not finite (JSON has no NaN or infinity).
std::string JsonNumber(double x);

// The four cumulative byte counts, as the fields
// "push_wire_bytes":…,"push_fp32_bytes":…,"pull_wire_bytes":…,"pull_fp32_bytes":…
std::string TrafficFields(const TrafficStats& t);

// CRC-32 (zlib) of the fp32 bytes: equal copies of the parameters, equal CRCs.
uint32_t ParamsCrc(std::span<const float> params);

// What a step event reports (see above).
struct StepEventFields {
  uint64_t worker = 0;
  uint32_t rank = 0;
  uint32_t world = 0;
  uint64_t step = 0;
  double loss = 0;
  double samples_per_s = 0;
  TrafficStats traffic;
  bool resynced = false;
  std::optional<uint32_t> params_crc;  // with --report-params-crc
  uint64_t nonfinite = 0;
  double step_s = 0;
  double compute_s = 0;
};

std::string StepEvent(const StepEventFields& f);
std::string EvalEvent(uint64_t worker, uint64_t step, uint64_t epoch, double test_accuracy,
                      double test_loss);
// test_accuracy: when this worker evaluated at the end (--eval).
std::string DoneEvent(uint64_t worker, uint64_t steps, std::optional<double> test_accuracy,
                      uint32_t params_crc, double wall_s, const TrafficStats& traffic);
std::string WaitingEvent(int64_t join_at_step);
std::string JoinedEvent(uint64_t worker, uint64_t step, bool rejoin, uint32_t params_crc);
std::string ExpiredEvent(uint64_t worker, uint64_t step);
std::string LeftEvent(uint64_t worker, uint64_t step, int signal);
// Names only (OpenBLAS core names and vector sets), so nothing is escaped.
std::string BlasKernelsEvent(const BlasAdvice& advice);
// `address` as MetricsEndpoint::address() gives it ("127.0.0.1:9420",
// "[::1]:9420"); `port` its bound port.
std::string MetricsEvent(const std::string& address, int port);

// Writes `json` and a newline to stdout and flushes, in one fwrite (stdio
// locks the stream per call), so that events from the signal thread never
// interleave with the training loop's.
void EmitEvent(const std::string& json);

}  // namespace loco
