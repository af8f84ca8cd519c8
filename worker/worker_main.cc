// loco-worker: trains a built-in model (--model: the MLP on Fashion-MNIST, or
// the character-level transformer on the fortunes corpus) as one data-parallel
// worker of a LoCo-PS cluster. For charlm, "test_accuracy"/"test_loss" are
// next-byte accuracy and cross-entropy on the validation windows.
//
// Progress goes to stdout as JSON lines, the events of
// worker/worker_events.h (the keys are a contract); logs go to stderr. The
// steps themselves are worker/training_loop.h's.
//
// Exit status: 0 when training reached the target step (or the worker left
// on SIGTERM/SIGINT), 2 for invalid flags,
// 1 for any other error (message on stderr).
#include <cblas.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/gradient_encoder.h"
#include "client/push_codec.h"
#include "client/worker.h"
#include "client/worker_options.h"
#include "common/blas_advice.h"
#include "common/flags.h"
#include "common/lock_order_checks.h"
#include "common/log.h"
#include "common/termination_watch.h"
#include "data/batch_sampler.h"
#include "kernels/loco_compress.h"
#include "metrics/metrics_endpoint_flags.h"
#include "models/char_transformer.h"
#include "models/small_batch_gemm.h"
#include "security/transport_security.h"
#include "worker/group/local_group.h"
#include "worker/group/local_group_runner.h"
#include "worker/group/make_local_group.h"
#include "worker/trace_writer.h"
#include "worker/training_loop.h"
#include "worker/training_metrics.h"
#include "worker/training_task.h"
#include "worker/worker_config.h"
#include "worker/worker_events.h"

namespace {

using loco::Failure;
using loco::Status;

using Config = loco::WorkerConfig;

int Fail(const std::string& what, const Status& s) {
  LOG_ERROR(what << ": " << s.ToString());
  return 1;
}

// An error whose message is already the whole log line (loco::Failure).
int Fail(const Status& s) {
  LOG_ERROR(s.message());
  return 1;
}

// The built-in model named by --model, with its data.
loco::StatusOr<std::unique_ptr<loco::TrainingTask>> MakeTask(const Config& c,
                                                             const std::vector<size_t>& hidden) {
  if (c.model == "mlp") {
    loco::MlpDevice device;
    device.cuda = c.device == "cuda";
    device.max_batch = static_cast<size_t>(c.global_batch);  // a rank's share never exceeds it
    device.small_batch_gemm = c.cpu_products == "auto";
    device.ready_granularity = c.ready_granularity == "tensor" ? loco::ReadyGranularity::kTensor
                                                              : loco::ReadyGranularity::kPanel;
    return loco::MakeMlpTask(c.data_dir, hidden, device);
  }
  loco::CharTransformerConfig lm;
  lm.layers = static_cast<size_t>(c.lm_layers);
  lm.channels = static_cast<size_t>(c.lm_channels);
  lm.heads = static_cast<size_t>(c.lm_heads);
  lm.context = static_cast<size_t>(c.lm_context);
  return loco::MakeCharLmTask(c.corpus_dir, lm, static_cast<size_t>(c.eval_windows));
}

// The model of every local rank.
struct Model {
  std::unique_ptr<loco::TrainingTask> task;  // local rank 0's
  // Local rank r > 0 computes with replicas[r - 1].
  std::vector<std::unique_ptr<loco::TrainingTask>> replicas;
};

// MakeTask, and a replica for each further local rank (--local-devices).
loco::StatusOr<Model> LoadModel(const Config& c, const std::vector<size_t>& hidden) {
  auto made = MakeTask(c, hidden);
  if (!made.ok()) return Failure("building the model and its data", made.status());
  Model m;
  m.task = std::move(made).value();
  for (int64_t r = 1; r < c.local_devices; ++r) {
    auto replica = m.task->NewReplica(static_cast<size_t>(r));
    if (!replica.ok()) return Failure("building local rank " + std::to_string(r), replica.status());
    m.replicas.push_back(std::move(replica).value());
  }
  return m;
}

// One device per process: its gradient stays on it and is compressed there.
// With several local ranks the node's gradient is reduced into host memory
// (worker/group/local_group_runner.h) and compressed on the host.
bool GradientOnDevice(const Config& c) { return c.device == "cuda" && c.local_devices == 1; }

// The Worker's settings, with a registry of its own for the metrics.
loco::WorkerOptions OptionsFromConfig(const Config& c) {
  loco::WorkerOptions o;
  o.coordinator = c.coordinator;
  o.name = c.name;
  o.codec = loco::ParsePushCodec(c.codec).value();  // the flag admits only valid names
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
  o.coordinator_outage_ms = static_cast<int>(c.coordinator_outage_ms);
  o.push_chunk_bytes = static_cast<size_t>(c.push_chunk_bytes);
  o.push_parts = c.push_parts;
  o.pull_parts = c.pull_parts;
  o.ordered_pushes = c.ordered_pushes;
  o.security = c.security;
  if (GradientOnDevice(c)) o.gradient_device = 0;
  o.metrics_registry = std::make_shared<prometheus::Registry>();
  return o;
}

// SIGTERM/SIGINT: leave at once (the step in progress stops waiting for
// this worker), report it and end the process; nothing else is saved.
// The handler takes `joining` first (see Train), but waits for a join at
// most kJoinWaitOnSignal: a join that still retries (the coordinator
// unreachable, for up to --coordinator-outage-ms) has admitted nothing, and
// a worker admitted meanwhile is dropped at the coordinator's heartbeat
// timeout. Without the bound, Ctrl-C or a pod's SIGTERM would wait minutes.
constexpr std::chrono::seconds kJoinWaitOnSignal{2};

void LeaveOnSignal(loco::TerminationWatch& termination, loco::Worker& w,
                   std::timed_mutex& joining) {
  termination.Start([&w, &joining](int sig) {
    std::unique_lock<std::timed_mutex> lock(joining, std::defer_lock);
    if (!lock.try_lock_for(kJoinWaitOnSignal)) {
      LOG_WARN("signal " << sig << " while joining: ending without waiting for the join");
      loco::EmitEvent(loco::LeftEvent(w.worker_id(), 0, sig));
      std::_Exit(0);
    }
    const uint64_t at = w.step();
    if (Status s = w.LeaveNow(); !s.ok()) LOG_WARN("leaving on signal " << sig << ": " << s.ToString());
    loco::EmitEvent(loco::LeftEvent(w.worker_id(), at, sig));
    std::_Exit(0);
  });
}

// --join-at-step: waits until the cluster has reached that step.
Status WaitForJoinStep(const Config& c, loco::Worker& w) {
  LOG_INFO("waiting for the cluster to reach step " << c.join_at_step << " before joining");
  loco::EmitEvent(loco::WaitingEvent(c.join_at_step));
  auto seen = w.WaitForClusterStep(
      static_cast<uint64_t>(c.join_at_step),
      std::chrono::steady_clock::now() + std::chrono::milliseconds(c.join_wait_timeout_ms));
  if (!seen.ok()) return Failure("waiting for --join-at-step", seen.status());
  LOG_INFO("the cluster is at step " << *seen << "; joining");
  return Status::Ok();
}

// The node's parameters. With --local-devices N > 1 they are the runner's
// copy (the Worker's), all-gathered to the N replicas after every change.
struct Node {
  Node() = default;
  Node(const Node&) = delete;  // `params` may point into it
  Node& operator=(const Node&) = delete;

  std::unique_ptr<loco::LocalGroup> group;
  std::optional<loco::LocalGroupRunner> runner;
  std::vector<float> single_params;  // with one local device
  std::vector<float>* params = &single_params;
};

// Joins the cluster and sets the node up: with --local-devices > 1 the local
// group over the slices of the shards just joined; then the parameters (the
// initial ones, or the cluster's when it has trained already) and their
// broadcast to the local ranks.
Status JoinCluster(const Config& c, size_t num_parameters, const std::vector<float>& initial,
                   loco::Worker& w, Node* node) {
  const uint32_t local = static_cast<uint32_t>(c.local_devices);
  if (Status s = w.Join(num_parameters); !s.ok()) return Failure("joining", s);
  if (local > 1) {
    std::vector<loco::LocalSlice> shards;
    for (const auto& [offset, length] : w.shard_ranges()) {
      shards.push_back({static_cast<size_t>(offset), static_cast<size_t>(length)});
    }
    auto slices = loco::SlicesForShards(shards, static_cast<int>(local),
                                        static_cast<size_t>(c.block_size));
    if (!slices.ok()) return Failure("slicing the model for the local group", slices.status());
    // NCCL when the ranks are CUDA devices and this build has it (or when
    // asked for; checked with the flags), else threads in host memory.
    const bool nccl = c.local_group == "nccl" ||
                      (c.local_group == "auto" && c.device == "cuda" &&
                       loco::HaveNcclLocalGroup());
    auto made_group = loco::MakeLocalGroup(
        nccl ? loco::LocalGroupKind::kNccl : loco::LocalGroupKind::kCpu,
        std::move(slices).value(), num_parameters,
        std::chrono::milliseconds(c.step_timeout_ms));
    if (!made_group.ok()) return Failure("building the local group", made_group.status());
    node->group = std::move(made_group).value();
    node->runner.emplace(node->group.get(), &w);
    node->params = node->runner->node_params();
  }
  if (Status s = w.InitParameters(initial, node->params); !s.ok()) {
    return Failure("initialising", s);
  }
  if (node->runner) {
    if (Status s = node->runner->Broadcast(); !s.ok()) {
      return Failure("broadcasting to local ranks", s);
    }
  }
  return Status::Ok();
}

// The membership view arrives with heartbeats; polling it is bounded by
// the join timeout. Reproducible runs (bench/convergence) need every worker
// in the view before step 0 opens, or the first steps run with a smaller
// world and another split of the batch.
void WaitForWorkers(const Config& c, const loco::Worker& w) {
  if (c.wait_for_workers <= 0 || w.step() != 0) return;
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

// Which of LoCo-PS's own CPU kernel paths this worker takes, also picked
// from the CPU: the compress of its pushes and, for the MLP on the CPU,
// the small-batch products (models/small_batch_gemm.h).
void LogLocoKernels(const Config& c, const loco::WorkerOptions& options) {
  std::string compress = "none (" + c.codec + " pushes are not compressed)";
  if (c.device == "cuda") {
    compress = "on the GPU";
  } else if (loco::IsBlockCodec(options.codec)) {
    compress = loco::cpu::LocoCompressPathName(loco::BlockCodecParams(options, 0));
  }
  std::string products = "not used by this model";
  if (c.model == "mlp" && c.device == "cpu") {
    using Gemm = loco::SmallBatchGemm;
    if (c.cpu_products != "auto") {
      products = "off (--cpu-products=" + c.cpu_products + ")";
    } else if (!Gemm::Available()) {
      products = "none on this CPU (OpenBLAS for every batch)";
    } else {
      products = Gemm::Describe(Gemm::BestPath()) + " for batches of at most " +
                 std::to_string(Gemm::MaxRows(Gemm::BestPath())) + " rows";
    }
  }
  LOG_INFO("LoCo-PS kernels: compress " << compress << "; small-batch products " << products);
}

// OpenBLAS chose its kernels from the CPU (or OPENBLAS_CORETYPE) when it
// loaded; which ones it runs is most of the step's compute time.
void LogBlasKernels() {
  LOG_INFO("OpenBLAS " << openblas_get_corename() << " kernels, " << openblas_get_num_threads()
                       << " thread(s)");
  const bool blas_pinned = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  if (const std::optional<loco::BlasAdvice> advice = loco::AdviseBlasKernels(
          openblas_get_corename(), loco::DetectCpuVectors(), blas_pinned)) {
    LOG_WARN(advice->ToString());
    // For loco-launch, which shows it once (the log is in a file).
    loco::EmitEvent(loco::BlasKernelsEvent(*advice));
  }
}

// Joins when the cluster is due (--join-at-step) and says so; then waits
// for the other initial workers. `joining` is held while Join and
// InitParameters run (see Train).
Status JoinWhenDue(const Config& c, const loco::TrainingTask& task,
                   const std::vector<float>& initial, loco::Worker& worker,
                   std::timed_mutex& joining, Node* node) {
  if (c.join_at_step > 0) LOCO_RETURN_IF_ERROR(WaitForJoinStep(c, worker));
  {
    std::lock_guard<std::timed_mutex> lock(joining);
    LOCO_RETURN_IF_ERROR(JoinCluster(c, task.num_parameters(), initial, worker, node));
  }
  loco::EmitEvent(loco::JoinedEvent(worker.worker_id(), worker.step(), /*rejoin=*/false,
                                    loco::ParamsCrc(*node->params)));
  WaitForWorkers(c, worker);
  return Status::Ok();
}

// What the training loop runs with, beside the joined worker and node.
struct TrainingInputs {
  Model* model = nullptr;
  const std::vector<float>* initial = nullptr;
  loco::BatchSampler* sampler = nullptr;
  loco::TraceWriter* trace = nullptr;  // null without --trace-dir
  loco::TrainingMetrics* metrics = nullptr;
  uint64_t total_steps = 0;
};

// The steps (worker/training_loop.h) up to the total, then the final
// evaluation; returns its test accuracy.
loco::StatusOr<std::optional<double>> RunTrainingLoop(const Config& c,
                                                      const TrainingInputs& inputs,
                                                      loco::Worker& worker, Node& node) {
  loco::TrainingLoopParts parts;
  parts.config = &c;
  parts.task = inputs.model->task.get();
  parts.replicas = &inputs.model->replicas;
  parts.worker = &worker;
  parts.runner = node.runner ? &*node.runner : nullptr;
  parts.params = node.params;
  parts.initial = inputs.initial;
  parts.sampler = inputs.sampler;
  parts.trace = inputs.trace;
  parts.metrics = inputs.metrics;
  parts.total_steps = inputs.total_steps;
  parts.gradient_on_device = GradientOnDevice(c);
  loco::TrainingLoop loop(parts);
  LOCO_RETURN_IF_ERROR(loop.Run());
  return loop.EvaluateAtEnd();
}

// `flags` parsed `c` (FlagSet::Named in refusals).
// With --steps, CheckWorkerConfig refused a --join-at-step at or past the
// end already; with --epochs the end is known only once the data set is
// loaded. Logs the refusal and returns true when it is past the end.
bool JoinAtStepPastTheEnd(const Config& c, const loco::FlagSet& flags,
                          const loco::TrainingTask& task, const loco::BatchSampler& sampler,
                          uint64_t total) {
  if (c.join_at_step <= 0 || static_cast<uint64_t>(c.join_at_step) < total) return false;
  LOG_ERROR("invalid value '" << c.join_at_step << "' for " << flags.Named("join-at-step")
                              << ": training ends at step " << total << " ("
                              << flags.Named("epochs") << " " << c.epochs << " of "
                              << sampler.steps_per_epoch() << " steps each: "
                              << task.num_train_samples() << " training samples in batches of "
                              << c.global_batch << "); expected a step below it");
  return true;
}

// SIGTERM/SIGINT before the Worker exists (the data loads, the model is
// built): nothing was admitted, so nothing to leave; the process ends at
// once instead of when loading is over (a pod's SIGTERM would otherwise
// wait for a large data set, or forever for a stalled file system).
void EndOnSignalBeforeJoining(loco::TerminationWatch& termination) {
  termination.Start([](int sig) {
    LOG_INFO("signal " << sig << " before joining (loading the model and its data); ending");
    loco::EmitEvent(loco::LeftEvent(0, 0, sig));
    std::_Exit(0);
  });
}

int Train(const Config& c, const loco::FlagSet& flags, const std::vector<size_t>& hidden) {
  const auto started = std::chrono::steady_clock::now();
  loco::TerminationWatch before_joining;
  EndOnSignalBeforeJoining(before_joining);
  LOG_INFO("loading --model " << c.model << " and its data");
  auto model = LoadModel(c, hidden);
  if (!model.ok()) return Fail(model.status());
  loco::TrainingTask& task = *model->task;
  const std::vector<float> initial = task.InitialParameters(static_cast<uint64_t>(c.seed));
  auto sampler = loco::BatchSampler::Create(task.num_train_samples(), static_cast<size_t>(c.global_batch),
                                            static_cast<uint64_t>(c.seed));
  if (!sampler.ok()) return Fail("data sampler", sampler.status());
  const uint64_t total = c.steps > 0 ? static_cast<uint64_t>(c.steps)
                                     : static_cast<uint64_t>(c.epochs) * sampler->steps_per_epoch();
  // Before the metrics port opens, so that a refused run opens none.
  if (JoinAtStepPastTheEnd(c, flags, task, *sampler, total)) return 2;
  const loco::WorkerOptions options = OptionsFromConfig(c);
  loco::TrainingMetrics training_metrics(*options.metrics_registry);
  auto metrics_endpoint = loco::StartMetricsEndpointIfEnabled(
      loco::MetricsEndpointOptionsFromFlags(c.metrics_host, c.metrics_port),
      options.metrics_registry);
  if (!metrics_endpoint.ok()) return Fail("serving metrics", metrics_endpoint.status());
  if (*metrics_endpoint) {
    LOG_INFO("metrics on " << (*metrics_endpoint)->url());
    loco::EmitEvent(
        loco::MetricsEvent((*metrics_endpoint)->address(), (*metrics_endpoint)->port()));
  }
  // Connect opens no connection: it checks the options and loads the TLS
  // material. A refused option is a usage error (2); anything else (the
  // files went away since main read them) a runtime failure (1).
  auto connected = loco::Worker::Connect(options);
  if (!connected.ok()) {
    if (connected.status().code() != loco::StatusCode::kInvalidArgument) {
      return Fail("connecting", connected.status());
    }
    LOG_ERROR(flags.WithEnvironmentSources(connected.status().ToString()));
    return 2;
  }
  loco::Worker& worker = **connected;
  // After every refusal above, so that a refused run writes no trace.
  std::optional<loco::TraceWriter> trace;
  if (!c.trace_dir.empty()) {
    auto opened = loco::TraceWriter::Open(c.trace_dir, c.name);
    if (!opened.ok()) return Fail("opening the trace", opened.status());
    trace.emplace(std::move(opened).value());
  }
  // Signals are watched from before the join, so that a worker waiting for
  // --join-at-step ends at once too. `joining` is held while Join and
  // InitParameters run: a signal then waits for them, so that LeaveNow
  // knows the worker id the coordinator has just admitted.
  std::timed_mutex joining;
  loco::TerminationWatch termination;
  // A signal that comes meanwhile stays pending (blocked in every thread)
  // for the next watch: none is lost.
  before_joining.Stop();
  LeaveOnSignal(termination, worker, joining);
  Node node;
  if (Status s = JoinWhenDue(c, task, initial, worker, joining, &node); !s.ok()) return Fail(s);
  LOG_INFO("training " << task.num_parameters() << " parameters for " << total
                       << " steps from step " << worker.step());
  LogBlasKernels();
  LogLocoKernels(c, options);

  const TrainingInputs inputs{&*model, &initial, &*sampler, trace ? &*trace : nullptr,
                              &training_metrics, total};
  auto accuracy = RunTrainingLoop(c, inputs, worker, node);
  if (!accuracy.ok()) return Fail(accuracy.status());

  const uint64_t final_step = worker.step();
  const uint64_t id = worker.worker_id();
  termination.Stop();
  if (Status s = worker.Leave(); !s.ok()) LOG_WARN("leaving: " << s.ToString());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  loco::EmitEvent(loco::DoneEvent(id, final_step, *accuracy, loco::ParamsCrc(*node.params), wall,
                                  worker.traffic()));
  return 0;
}

// A refused setting: its message on stderr (saying which flags came from
// the environment), exit code 2.
int UsageError(const loco::FlagSet& flags, const Status& s) {
  std::cerr << "loco-worker: " << flags.WithEnvironmentSources(s.message()) << "\n";
  return 2;
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
  if (Status s = loco::ParseHiddenLayers(c.hidden, &hidden, flags.Named("hidden")); !s.ok()) {
    return UsageError(flags, s);
  }
  if (c.model == "mlp") {
    if (Status s = loco::CheckMlpSize(c.hidden, hidden, loco::PhysicalMemoryBytes(),
                                      flags.Named("hidden"));
        !s.ok()) {
      return UsageError(flags, s);
    }
  }
  if (Status s = loco::CheckWorkerConfig(c, flags); !s.ok()) {
    return UsageError(flags, s);
  }
  std::vector<std::string> ignored_from_env;
  if (Status s = loco::CheckFlagsApply(c, flags, &ignored_from_env); !s.ok()) {
    return UsageError(flags, s);
  }
  // Checks the combination and reads the TLS files and the token before the
  // data is loaded, so that a bad setting is a usage error named at once.
  if (auto loaded = loco::TransportSecurity::Load(c.security, loco::TransportRole::kClient);
      !loaded.ok()) {
    return UsageError(flags, loaded.status());
  } else {
    (*loaded)->LogStartupWarnings("loco-worker");
  }
  // What Worker::Connect would refuse, before the data is loaded or a trace
  // written (the flags' own checks should leave nothing for it).
  if (Status s = loco::ValidateWorkerOptions(OptionsFromConfig(c)); !s.ok()) {
    return UsageError(flags, s);
  }
  if (c.name.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "worker");
    c.name = std::string(host) + "-" + std::to_string(getpid());
  }
  loco::SetLogTag("worker " + c.name);
  for (const std::string& note : ignored_from_env) LOG_WARN(note);
  if (c.check_flags) {
    std::cout << "loco-worker: the flags are valid\n";
    return 0;
  }
  // Before any thread exists (OpenBLAS, gRPC), so that every thread inherits
  // the mask and SIGTERM reaches the TerminationWatch only.
  if (Status s = loco::TerminationWatch::Install(); !s.ok()) {
    LOG_ERROR(s.ToString());
    return 1;
  }
  // OpenBLAS's thread pool is process state; set it once, before any product.
  openblas_set_num_threads(static_cast<int>(c.blas_threads));
  return Train(c, flags, hidden);
}
