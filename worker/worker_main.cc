// loco-worker: trains a built-in model (--model: the MLP on Fashion-MNIST, or
// the character-level transformer on the fortunes corpus) as one data-parallel
// worker of a LoCo-PS cluster. For charlm, "test_accuracy"/"test_loss" are
// next-byte accuracy and cross-entropy on the validation windows.
//
// Progress goes to stdout as JSON lines, the events of
// worker/worker_events.h (the keys are a contract); logs go to stderr.
//
// Exit status: 0 when training reached the target step (or the worker left
// on SIGTERM/SIGINT), 2 for invalid flags,
// 1 for any other error (message on stderr).
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/registry.h>

#include "common/flags.h"
#include "common/lock_order_checks.h"
#include "common/log.h"
#include "metrics/metrics_endpoint.h"
#include "worker/batch_sampler.h"
#include "worker/blas_kernels.h"
#include "worker/fashion_mnist.h"
#include "worker/make_local_group.h"
#include "worker/local_group_runner.h"
#include "worker/mlp.h"
#include "common/termination_watch.h"
#include "worker/text_corpus.h"
#include "worker/trace_writer.h"
#include "worker/training_metrics.h"
#include "worker/training_task.h"
#include "security/transport_security.h"
#include "worker/worker.h"
#include "worker/worker_config.h"
#include "worker/worker_events.h"

namespace {

using loco::Status;

using Config = loco::WorkerConfig;

// Rejoins after an expiry at most this many times per process.
constexpr int kMaxRejoins = 16;

bool ShouldEval(const std::string& policy, uint32_t rank) {
  return policy == "all" || (policy == "rank0" && rank == 0);
}

int Fail(const std::string& what, const Status& s) {
  LOG_ERROR(what << ": " << s.ToString());
  return 1;
}

// The built-in model named by --model, with its data.
loco::StatusOr<std::unique_ptr<loco::TrainingTask>> MakeTask(const Config& c,
                                                             const std::vector<size_t>& hidden) {
  if (c.model == "mlp") {
    loco::MlpDevice device;
    device.cuda = c.device == "cuda";
    device.max_batch = static_cast<size_t>(c.global_batch);  // a rank's share never exceeds it
    return loco::MakeMlpTask(c.data_dir, hidden, device);
  }
  loco::CharTransformerConfig lm;
  lm.layers = static_cast<size_t>(c.lm_layers);
  lm.channels = static_cast<size_t>(c.lm_channels);
  lm.heads = static_cast<size_t>(c.lm_heads);
  lm.context = static_cast<size_t>(c.lm_context);
  return loco::MakeCharLmTask(c.corpus_dir, lm, static_cast<size_t>(c.eval_windows));
}

int Train(const Config& c, const std::vector<size_t>& hidden) {
  const auto t0 = std::chrono::steady_clock::now();
  auto made = MakeTask(c, hidden);
  if (!made.ok()) return Fail("building the model and its data", made.status());
  loco::TrainingTask& task = **made;
  // Local rank r computes with replicas[r] (rank 0: the task itself).
  std::vector<std::unique_ptr<loco::TrainingTask>> replicas;
  for (int64_t r = 1; r < c.local_devices; ++r) {
    auto replica = task.NewReplica(static_cast<size_t>(r));
    if (!replica.ok()) return Fail("building local rank " + std::to_string(r), replica.status());
    replicas.push_back(std::move(replica).value());
  }
  const std::vector<float> initial = task.InitialParameters(static_cast<uint64_t>(c.seed));
  std::optional<loco::TraceWriter> trace;
  if (!c.trace_dir.empty()) {
    auto opened = loco::TraceWriter::Open(c.trace_dir, c.name);
    if (!opened.ok()) return Fail("opening the trace", opened.status());
    trace.emplace(std::move(opened).value());
  }

  loco::WorkerOptions o;
  o.coordinator = c.coordinator;
  o.name = c.name;
  o.codec = c.codec;
  o.bits = static_cast<int>(c.bits);
  o.block_size = static_cast<int>(c.block_size);
  o.beta = static_cast<float>(c.beta);
  o.reset_period = c.reset_period;
  o.error_bits = static_cast<int>(c.error_bits);
  o.stochastic_rounding = c.stochastic_rounding;
  o.seed = static_cast<uint64_t>(c.seed);
  o.rpc_timeout_ms = static_cast<int>(c.rpc_timeout_ms);
  o.pull_wait_ms = static_cast<int>(c.pull_wait_ms);
  o.step_timeout_ms = static_cast<int>(c.step_timeout_ms);
  o.join_timeout_ms = static_cast<int>(c.join_timeout_ms);
  o.max_retries = static_cast<int>(c.max_retries);
  o.push_chunk_bytes = static_cast<size_t>(c.push_chunk_bytes);
  o.push_parts = c.push_parts;
  o.pull_parts = c.pull_parts;
  o.security = c.security;
  // One device per process: its gradient stays on it and is compressed there.
  // With several local ranks the node's gradient is reduced into host memory
  // (worker/local_group_runner.h) and compressed on the host.
  const bool gradient_on_device = c.device == "cuda" && c.local_devices == 1;
  if (gradient_on_device) o.gradient_device = 0;
  o.metrics_registry = std::make_shared<prometheus::Registry>();
  loco::TrainingMetrics training_metrics(*o.metrics_registry);
  std::unique_ptr<loco::MetricsEndpoint> metrics_endpoint;
  if (c.metrics_port > 0) {
    auto endpoint = loco::MetricsEndpoint::Start(c.metrics_host, static_cast<int>(c.metrics_port),
                                                 o.metrics_registry);
    if (!endpoint.ok()) return Fail("serving metrics", endpoint.status());
    metrics_endpoint = std::move(endpoint).value();
    LOG_INFO("metrics on " << metrics_endpoint->url());
  }
  auto sampler = loco::BatchSampler::Create(task.num_train_samples(), static_cast<size_t>(c.global_batch),
                                            static_cast<uint64_t>(c.seed));
  if (!sampler.ok()) return Fail("data sampler", sampler.status());
  const uint64_t per_epoch = sampler->steps_per_epoch();
  const uint64_t total = c.steps > 0 ? static_cast<uint64_t>(c.steps)
                                     : static_cast<uint64_t>(c.epochs) * per_epoch;
  if (c.join_at_step > 0 && static_cast<uint64_t>(c.join_at_step) >= total) {
    LOG_ERROR("invalid value '" << c.join_at_step << "' for --join-at-step: training ends at step "
                                << total << " (--steps or --epochs); expected a step below it");
    return 2;
  }
  auto connected = loco::Worker::Connect(o);
  if (!connected.ok()) {
    LOG_ERROR(connected.status().ToString());
    return 2;
  }
  loco::Worker& w = **connected;
  // SIGTERM/SIGINT: leave at once (the step in progress stops waiting for
  // this worker), report it and end the process; nothing else is saved.
  // Watched from before the join, so that a worker waiting for
  // --join-at-step ends at once too. `joining` is held while Join and
  // InitParameters run: a signal then waits for them, so that LeaveNow
  // knows the worker id the coordinator has just admitted.
  std::mutex joining;
  loco::TerminationWatch termination;
  termination.Start([&w, &joining](int sig) {
    std::lock_guard<std::mutex> lock(joining);
    const uint64_t at = w.step();
    if (Status s = w.LeaveNow(); !s.ok()) LOG_WARN("leaving on signal " << sig << ": " << s.ToString());
    loco::EmitEvent(loco::LeftEvent(w.worker_id(), at, sig));
    std::_Exit(0);
  });
  if (c.join_at_step > 0) {
    LOG_INFO("waiting for the cluster to reach step " << c.join_at_step << " before joining");
    loco::EmitEvent(loco::WaitingEvent(c.join_at_step));
    auto seen = w.WaitForClusterStep(
        static_cast<uint64_t>(c.join_at_step),
        std::chrono::steady_clock::now() + std::chrono::milliseconds(c.join_wait_timeout_ms));
    if (!seen.ok()) return Fail("waiting for --join-at-step", seen.status());
    LOG_INFO("the cluster is at step " << *seen << "; joining");
  }
  // With --local-devices N > 1 the node's parameters are the runner's copy
  // (the Worker's), all-gathered to the N replicas after every change.
  const uint32_t local = static_cast<uint32_t>(c.local_devices);
  std::unique_ptr<loco::LocalGroup> group;
  std::optional<loco::LocalGroupRunner> runner;
  std::vector<float> single_params;
  std::vector<float>* params_ptr = &single_params;
  {
    std::lock_guard<std::mutex> lock(joining);
    if (Status s = w.Join(task.num_parameters()); !s.ok()) return Fail("joining", s);
    if (local > 1) {
      std::vector<loco::LocalSlice> shards;
      for (const auto& [offset, length] : w.shard_ranges()) {
        shards.push_back({static_cast<size_t>(offset), static_cast<size_t>(length)});
      }
      auto slices = loco::SlicesForShards(shards, static_cast<int>(local),
                                          static_cast<size_t>(c.block_size));
      if (!slices.ok()) return Fail("slicing the model for the local group", slices.status());
      // NCCL when the ranks are CUDA devices and this build has it (or when
      // asked for; checked with the flags), else threads in host memory.
      const bool nccl = c.local_group == "nccl" ||
                        (c.local_group == "auto" && c.device == "cuda" &&
                         loco::HaveNcclLocalGroup());
      auto made_group = loco::MakeLocalGroup(
          nccl ? loco::LocalGroupKind::kNccl : loco::LocalGroupKind::kCpu,
          std::move(slices).value(), task.num_parameters(),
          std::chrono::milliseconds(c.step_timeout_ms));
      if (!made_group.ok()) return Fail("building the local group", made_group.status());
      group = std::move(made_group).value();
      runner.emplace(group.get(), &w);
      params_ptr = runner->node_params();
    }
    if (Status s = w.InitParameters(initial, params_ptr); !s.ok()) return Fail("initialising", s);
    if (runner) {
      if (Status s = runner->Broadcast(); !s.ok()) return Fail("broadcasting to local ranks", s);
    }
  }
  std::vector<float>& params = *params_ptr;
  loco::EmitEvent(loco::JoinedEvent(w.worker_id(), w.step(), /*rejoin=*/false,
                                    loco::ParamsCrc(params)));
  // The membership view arrives with heartbeats; polling it is bounded by
  // the join timeout. Reproducible runs (bench/convergence) need every worker
  // in the view before step 0 opens, or the first steps run with a smaller
  // world and another split of the batch.
  if (c.wait_for_workers > 0 && w.step() == 0) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(c.join_timeout_ms);
    while (w.world_size() < static_cast<uint32_t>(c.wait_for_workers) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (w.world_size() < static_cast<uint32_t>(c.wait_for_workers)) {
      LOG_WARN("starting with " << w.world_size() << " worker(s); --wait-for-workers asked for "
                                << c.wait_for_workers);
    }
  }
  int rejoins = 0;
  LOG_INFO("training " << task.num_parameters() << " parameters for " << total
                       << " steps from step " << w.step());
  // OpenBLAS chose its kernels from the CPU (or OPENBLAS_CORETYPE) when it
  // loaded; which ones it runs is most of the step's compute time.
  LOG_INFO("OpenBLAS " << openblas_get_corename() << " kernels, " << openblas_get_num_threads()
                       << " thread(s)");
  const bool blas_pinned = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  if (const std::optional<loco::BlasAdvice> advice = loco::AdviseBlasKernels(
          openblas_get_corename(), loco::DetectCpuVectors(), blas_pinned)) {
    LOG_WARN(advice->ToString());
    // For loco-launch, which shows it once (the log is in a file): names
    // only, so nothing needs escaping.
    loco::EmitEvent(loco::BlasKernelsEvent(*advice));
  }

  std::vector<float> grads;
  // Per local rank (--local-devices > 1): sample indices, loss.
  std::vector<std::vector<size_t>> local_idx(local);
  std::vector<double> local_loss(local, 0.0);
  auto window_start = std::chrono::steady_clock::now();
  uint64_t window_samples = 0, since_report = 0;
  bool warned_empty = false;
  while (w.step() < total) {
    const uint64_t t = w.step();
    uint32_t world = std::max<uint32_t>(w.world_size(), 1);
    const uint32_t rank = std::min(w.rank(), world - 1);
    // Data order: local rank l of node `rank` takes the global positions
    // that rank rank·N + l of a flat world of world·N workers would take
    // (BatchSampler), so the node covers a contiguous run of the batch and
    // N = 1 is the plain layout. Indices are drawn here, on the training
    // thread (BatchSampler is not thread-safe).
    std::vector<size_t> idx;
    for (uint32_t l = 0; l < local; ++l) {
      local_idx[l] = sampler->Indices(t, world * local, rank * local + l);
      idx.insert(idx.end(), local_idx[l].begin(), local_idx[l].end());
    }
    if (idx.empty() && !warned_empty) {
      // More workers (or local ranks) than samples per step: zero gradients.
      LOG_WARN("world " << world << " x " << local << " local device(s) > global batch: no "
                        << "samples for rank " << rank);
      warned_empty = true;
    }
    const std::optional<uint32_t> crc =
        c.report_params_crc ? std::optional<uint32_t>(loco::ParamsCrc(params)) : std::nullopt;
    double loss = 0;
    loco::StatusOr<loco::StepResult> r = loco::Internal("no step ran");
    if (!runner) {
      // The gradient vector keeps the model's size: the worker's push
      // threads read the parts of it that are final while it is written.
      if (!gradient_on_device) grads.resize(task.num_parameters());
      bool grad_failed = false;
      const auto compute = [&](const loco::GradientReady& ready) -> Status {
        if (idx.empty()) {
          std::fill(grads.begin(), grads.end(), 0.0f);
          return Status::Ok();
        }
        auto l = task.LossAndGradient(params, idx, &grads, ready);
        if (!l.ok()) {
          grad_failed = true;
          return l.status();
        }
        loss = *l;
        return Status::Ok();
      };
      // On a device, the gradient stays there and each shard is compressed
      // there (WorkerOptions::gradient_device); only payloads reach the host.
      const auto compute_on_device = [&](const loco::GradientReady& ready) -> Status {
        auto l = task.LossAndDeviceGradient(params, idx,
                                            c.overlap_backward ? ready : loco::GradientReady{});
        if (!l.ok()) {
          grad_failed = true;
          return l.status();
        }
        loss = *l;
        return Status::Ok();
      };
      if (gradient_on_device) {
        r = w.Step(compute_on_device, task.device_gradient(), &params);
      } else if (c.overlap_backward) {
        r = w.Step(compute, grads, &params);
      } else {
        // No overlap: nothing goes before the whole gradient is final. The
        // computation still runs inside Step, so that the step's phases
        // (loco_worker_step_phase_seconds) count it.
        r = w.Step([&](const loco::GradientReady& ready) -> Status {
          LOCO_RETURN_IF_ERROR(compute({}));
          ready(0);
          return Status::Ok();
        }, grads, &params);
      }
      if (grad_failed) return Fail("computing the gradient", r.status());
    } else {
      std::atomic<bool> grad_failed{false};
      r = runner->Step([&](int lr, std::span<const float> at, std::vector<float>* g) -> Status {
        const size_t l = static_cast<size_t>(lr);
        local_loss[l] = 0;
        if (local_idx[l].empty()) {
          g->assign(task.num_parameters(), 0.0f);
          return Status::Ok();
        }
        loco::TrainingTask& mine = l == 0 ? task : *replicas[l - 1];
        auto got = mine.LossAndGradient(at, local_idx[l], g);
        if (!got.ok()) {
          grad_failed = true;
          return got.status();
        }
        local_loss[l] = *got;
        return Status::Ok();
      });
      if (grad_failed) return Fail("computing the gradient", r.status());
      // The node's loss: the local means weighted by their sample counts.
      for (uint32_t l = 0; l < local && !idx.empty(); ++l) {
        loss += local_loss[l] * static_cast<double>(local_idx[l].size()) /
                static_cast<double>(idx.size());
      }
    }
    if (!r.ok() && w.expired() && rejoins < kMaxRejoins) {
      // Removed by the coordinator (stalled past the heartbeat timeout):
      // this step's gradient is dropped; join again and carry on.
      ++rejoins;
      LOG_WARN("step " << t << ": " << r.status().ToString() << "; rejoining");
      loco::EmitEvent(loco::ExpiredEvent(w.worker_id(), t));
      if (Status s = w.Rejoin(initial, &params); !s.ok()) return Fail("rejoining", s);
      if (runner) {
        if (Status s = runner->Broadcast(); !s.ok()) return Fail("broadcasting to local ranks", s);
      }
      loco::EmitEvent(loco::JoinedEvent(w.worker_id(), w.step(), /*rejoin=*/true,
                                        loco::ParamsCrc(params)));
      continue;
    }
    if (!r.ok()) return Fail("step " + std::to_string(t), r.status());
    window_samples += idx.size();
    training_metrics.OnStep(loss, idx.size());
    if (trace && !idx.empty()) {
      if (Status s = trace->Step(t, loss); !s.ok()) return Fail("writing the trace", s);
    }
    if (++since_report >= static_cast<uint64_t>(c.report_every) || r->resynced) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - window_start).count();
      const loco::TrafficStats tr = w.traffic();
      training_metrics.OnThroughput(secs > 0 ? static_cast<double>(window_samples) / secs : 0.0);
      loco::StepEventFields f;
      f.worker = w.worker_id();
      f.rank = rank;
      f.world = world;
      f.step = t;
      f.loss = loss;
      f.samples_per_s = secs > 0 ? static_cast<double>(window_samples) / secs : 0.0;
      f.traffic = tr;
      f.resynced = r->resynced;
      f.params_crc = crc;
      f.nonfinite = r->nonfinite;
      f.step_s = r->seconds;
      f.compute_s = r->compute_seconds;
      loco::EmitEvent(loco::StepEvent(f));
      window_start = now;
      window_samples = 0;
      since_report = 0;
    }
    const uint64_t now_step = w.step();
    const uint64_t eval_period =
        c.eval_every > 0 ? static_cast<uint64_t>(c.eval_every) : per_epoch;
    if (now_step / eval_period > t / eval_period && now_step < total &&
        ShouldEval(c.eval, w.rank())) {
      auto e = task.Evaluate(params);
      if (!e.ok()) return Fail("evaluating", e.status());
      if (trace) {
        if (Status s = trace->Eval(now_step, now_step / per_epoch, e->accuracy, e->loss); !s.ok()) {
          return Fail("writing the trace", s);
        }
      }
      loco::EmitEvent(loco::EvalEvent(w.worker_id(), now_step, now_step / per_epoch,
                                      e->accuracy, e->loss));
    }
  }

  std::optional<double> accuracy;
  if (ShouldEval(c.eval, w.rank())) {
    auto e = task.Evaluate(params);
    if (!e.ok()) return Fail("evaluating", e.status());
    if (trace) {
      if (Status s = trace->Eval(w.step(), w.step() / per_epoch, e->accuracy, e->loss); !s.ok()) {
        return Fail("writing the trace", s);
      }
    }
    if (w.step() % per_epoch == 0) {
      loco::EmitEvent(loco::EvalEvent(w.worker_id(), w.step(), w.step() / per_epoch,
                                      e->accuracy, e->loss));
    }
    accuracy = e->accuracy;
  }
  const uint64_t final_step = w.step();
  const uint64_t id = w.worker_id();
  termination.Stop();
  if (Status s = w.Leave(); !s.ok()) LOG_WARN("leaving: " << s.ToString());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  loco::EmitEvent(loco::DoneEvent(id, final_step, accuracy, loco::ParamsCrc(params), wall,
                                  w.traffic()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  loco::DisableLockOrderChecks();
  Config c;
  loco::FlagSet flags("loco-worker");
  loco::DefineWorkerFlags(flags, &c);
  bool help = false;
  if (Status s = flags.Parse(argc, argv, &help); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << flags.Help();
    return 0;
  }
  if (c.print_markdown) {
    std::cout << flags.MarkdownRows();
    return 0;
  }
  std::vector<size_t> hidden;
  if (Status s = loco::ParseHiddenLayers(c.hidden, &hidden); !s.ok()) {
    std::cerr << "loco-worker: " << s.message() << "\n";
    return 2;
  }
  if (Status s = loco::CheckWorkerConfig(c); !s.ok()) {
    std::cerr << "loco-worker: " << s.message() << "\n";
    return 2;
  }
  // Checks the combination and reads the TLS files and the token before the
  // data is loaded, so that a bad setting is a usage error named at once.
  if (auto loaded = loco::TransportSecurity::Load(c.security, loco::TransportRole::kClient);
      !loaded.ok()) {
    std::cerr << "loco-worker: " << loaded.status().message() << "\n";
    return 2;
  } else {
    (*loaded)->LogStartupWarnings("loco-worker");
  }
  if (c.name.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "worker");
    c.name = std::string(host) + "-" + std::to_string(getpid());
  }
  loco::SetLogTag("worker " + c.name);
  // Before any thread exists (OpenBLAS, gRPC), so that every thread inherits
  // the mask and SIGTERM reaches the TerminationWatch only.
  if (Status s = loco::TerminationWatch::Install(); !s.ok()) {
    LOG_ERROR(s.ToString());
    return 1;
  }
  // OpenBLAS's thread pool is process state; set it once, before any product.
  openblas_set_num_threads(static_cast<int>(c.blas_threads));
  return Train(c, hidden);
}
