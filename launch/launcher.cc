#include "launch/launcher.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>

#include "common/blas_advice.h"
#include "common/log.h"
#include "launch/child_argv.h"

namespace loco {

struct Launcher::WorkerState {
  bool done = false;
  bool left = false;   // reported a clean leave (SIGTERM)
  bool ended = false;  // the process exited (and was accounted for)
  // A join-worker fault's worker until its first "joined" event: it waits
  // for its step and neither trains nor holds the run open meanwhile.
  bool awaiting_join = false;
  std::string join_fault;  // the fault that started it, for events
  double loss = 0, samples_per_s = 0;
  uint64_t step = 0;
  double push_wire = 0, push_fp32 = 0, pull_wire = 0, pull_fp32 = 0;
  double test_accuracy = -1;
  // Mean loss of the first and of the latest kLossWindow reported steps.
  std::vector<double> first_losses;
  std::deque<double> last_losses;
};

namespace {

constexpr size_t kLossWindow = 10;

double Mean(const auto& values) {
  double sum = 0;
  for (double x : values) sum += x;
  return values.empty() ? 0.0 : sum / double(values.size());
}

std::string PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? "0" : address.substr(colon + 1);
}

// A field of a worker's event as its JSON text; empty when absent.
std::string Field(const FlatJson& event, const std::string& key) {
  auto it = event.find(key);
  return it == event.end() ? std::string() : it->second;
}

}  // namespace

Launcher::Launcher(LaunchOptions options, const volatile std::sig_atomic_t* interrupted)
    : options_(std::move(options)),
      total_steps_(options_.total_steps()),
      interrupted_(interrupted) {}

Launcher::~Launcher() { StopAll(); }

Status Launcher::ChildFailure(const ChildProcess& child, const std::string& what) const {
  return Aborted(child.name() + " (pid " + std::to_string(child.pid()) + ") " + what +
                 "; last lines of " + child.log_path() + ":\n" + child.LogTail(12));
}

void Launcher::Event(const std::string& what) {
  std::printf("event: %s\n", what.c_str());
  std::fflush(stdout);
  faults_so_far_.events.push_back(what);
}

Status Launcher::StartListener(const std::string& name, std::vector<std::string> argv,
                               const ScrapeLabels& labels, std::unique_ptr<ChildProcess>* slot,
                               std::string* address, std::vector<std::string>* preamble) {
  *slot = std::make_unique<ChildProcess>(name, std::move(argv),
                                         options_.log_dir + "/" + name + ".log");
  ChildProcess& child = **slot;
  LOCO_RETURN_IF_ERROR(child.Start());
  auto deadline = Clock::now() + std::chrono::seconds(options_.startup_timeout_s);
  while (Clock::now() < deadline) {
    if (interrupted_ && *interrupted_) return Aborted("interrupted");
    auto line = child.WaitLine(200);
    if (line && line->rfind("LISTENING ", 0) == 0) {
      *address = line->substr(10);
      return ScrapeAnnouncedPort(child, labels, deadline);
    }
    if (line && preamble != nullptr) preamble->push_back(*line);
    if (child.Poll()) {
      return ChildFailure(child, "exited during startup with " + child.DescribeExit());
    }
  }
  return ChildFailure(child, "did not report a listening port within " +
                                 std::to_string(options_.startup_timeout_s) + " s");
}

Status Launcher::ScrapeAnnouncedPort(ChildProcess& child, const ScrapeLabels& labels,
                                     Clock::time_point deadline) {
  if (!prometheus_) return Status::Ok();
  while (Clock::now() < deadline) {
    if (interrupted_ && *interrupted_) return Aborted("interrupted");
    auto line = child.WaitLine(200);
    if (line && line->rfind("METRICS ", 0) == 0) {
      const int port = std::atoi(PortOf(*line).c_str());
      if (port <= 0 || port > 65535) {
        return ChildFailure(child, "announced a /metrics endpoint without a port: " + *line);
      }
      return prometheus_->AddTarget(labels.role, labels.process, port);
    }
    if (child.Poll()) {
      return ChildFailure(child, "exited during startup with " + child.DescribeExit());
    }
  }
  return ChildFailure(child, "did not report its /metrics port within " +
                                 std::to_string(options_.startup_timeout_s) + " s");
}

void Launcher::AddMetrics(std::vector<std::string>* argv) const {
  if (prometheus_) argv->push_back("--metrics-port=-1");
}

void Launcher::ScrapeWorker(const std::string& name, const FlatJson& event) {
  if (!prometheus_) return;
  const double port = JsonNumber(event, "port", 0);
  Status added = port >= 1 && port <= 65535
                     ? prometheus_->AddTarget("worker", name, static_cast<int>(port))
                     : InvalidArgument("its metrics event names no port");
  if (!added.ok()) Event(name + "'s /metrics is not scraped: " + added.message());
}

Status Launcher::StartWorker(std::optional<uint64_t> join_at_step) {
  const std::string name = "worker-" + std::to_string(workers_.size());
  std::vector<std::string> argv = worker_argv_;
  // Before the user's --worker-args, which may override them.
  argv.insert(argv.begin() + 1,
              join_at_step ? "--join-at-step=" + std::to_string(*join_at_step)
                           : "--wait-for-workers=" + std::to_string(options_.workers));
  argv.insert(argv.begin() + 1, "--name=" + name);
  AddMetrics(&argv);
  auto child = std::make_unique<ChildProcess>(name, argv, options_.log_dir + "/" + name + ".log");
  LOCO_RETURN_IF_ERROR(child->Start());
  workers_.push_back(std::move(child));
  return Status::Ok();
}

Status Launcher::RestartServer(size_t shard, uint64_t at_step) {
  const ChildProcess& dead = *servers_[shard];
  const std::string why = dead.DescribeExit();
  if (faults_so_far_.server_restarts >= options_.max_server_restarts) {
    return ChildFailure(dead, "exited with " + why + " and the run already restarted servers " +
                                  std::to_string(faults_so_far_.server_restarts) +
                                  " times (--max-server-restarts)");
  }
  if (options_.checkpoint_dir.empty()) {
    return ChildFailure(dead, "exited with " + why + "; without --checkpoint-dir its shard cannot "
                              "be restored, so training cannot complete");
  }
  ++faults_so_far_.server_restarts;
  // The same port: the workers and the coordinator know the server by address.
  std::vector<std::string> argv = server_argv_[shard];
  for (auto& arg : argv) {
    if (arg == "--port=0") arg = "--port=" + PortOf(server_address_[shard]);
  }
  const std::string name = "server-" + std::to_string(shard) + ".restart" +
                           std::to_string(faults_so_far_.server_restarts);
  std::string address;
  std::vector<std::string> preamble;
  LOCO_RETURN_IF_ERROR(StartListener(name, argv, {"server", "server-" + std::to_string(shard)},
                                     &servers_[shard], &address, &preamble));
  std::optional<uint64_t> restored;
  for (const auto& line : preamble) {
    if (line.rfind("RESTORED version=", 0) == 0) {
      restored = std::strtoull(line.c_str() + 17, nullptr, 10);
    }
  }
  if (!restored) {
    return ChildFailure(*servers_[shard], "restarted but found no valid checkpoint; its shard is "
                                          "lost, so training cannot complete");
  }
  const uint64_t lost = at_step > *restored ? at_step - *restored : 0;
  faults_so_far_.server_steps_lost += lost;
  Event("server-" + std::to_string(shard) + " died (" + why + ") at about step " +
        std::to_string(at_step) + "; restarted on " + address + ", resumed from its checkpoint "
        "at version " + std::to_string(*restored) + ": about " + std::to_string(lost) +
        " step(s) of its shard's updates lost");
  return Status::Ok();
}

void Launcher::FireKillWorker(const Fault& fault, uint64_t max_step) {
  int victim = -1;
  if (fault.target >= 0) {
    victim = fault.target < static_cast<int>(workers_.size()) ? fault.target : -1;
  } else {
    for (int i = static_cast<int>(workers_.size()) - 1; i >= 0 && victim < 0; --i) {
      const WorkerState& state = worker_states_[i];
      if (workers_[i]->running() && !state.done && !state.awaiting_join) victim = i;
    }
  }
  if (victim < 0 || !workers_[victim]->running()) {
    Event("fault " + fault.ToString() + ": no such running worker; skipped");
    return;
  }
  workers_[victim]->Signal(SIGKILL);
  Event("fault " + fault.ToString() + ": SIGKILL to " + workers_[victim]->name() + " at step " +
        std::to_string(max_step));
}

void Launcher::FireKillServer(const Fault& fault, uint64_t max_step) {
  const size_t shard = fault.target >= 0 ? static_cast<size_t>(fault.target) : 0;
  if (shard >= servers_.size() || !servers_[shard]->running()) {
    Event("fault " + fault.ToString() + ": no such running server; skipped");
    return;
  }
  servers_[shard]->Signal(SIGKILL);
  Event("fault " + fault.ToString() + ": SIGKILL to server-" + std::to_string(shard) +
        " at step " + std::to_string(max_step));
}

void Launcher::FireFaults(uint64_t max_step) {
  for (Fault& fault : options_.faults) {
    if (fault.fired || max_step < fault.step) continue;
    if (fault.kind == Fault::Kind::kKillCoordinator) {
      fault.fired = FireKillCoordinator(fault, max_step);
      continue;
    }
    fault.fired = true;
    switch (fault.kind) {
      case Fault::Kind::kKillWorker:
        FireKillWorker(fault, max_step);
        break;
      case Fault::Kind::kKillServer:
        FireKillServer(fault, max_step);
        break;
      case Fault::Kind::kJoinWorker:
        break;  // its worker was started at launch (StartJoiners) and joins by itself
      case Fault::Kind::kKillCoordinator:
        break;  // fired above: it may have to wait for an earlier one's restart
    }
  }
}

void Launcher::StopAll() {
  // Workers first (they leave cleanly on SIGTERM), then servers, then the coordinator.
  for (auto& worker : workers_) worker->Signal(SIGTERM);
  for (auto& worker : workers_) worker->Stop(5000);
  for (auto it = servers_.rbegin(); it != servers_.rend(); ++it) (*it)->Signal(SIGTERM);
  if (coordinator_) coordinator_->Signal(SIGTERM);
  for (auto it = servers_.rbegin(); it != servers_.rend(); ++it) (*it)->Stop(10000);
  if (coordinator_) coordinator_->Stop(10000);
  // Last, so that it scrapes the cluster until the end.
  if (prometheus_) prometheus_->Stop();
}

Status Launcher::Run(LaunchSummary* summary) {
  const Clock::time_point started = Clock::now();
  ::mkdir(options_.log_dir.c_str(), 0755);
  for (const Fault& fault : options_.faults) {
    if (fault.kind == Fault::Kind::kKillServer && options_.checkpoint_dir.empty()) {
      options_.checkpoint_dir = options_.log_dir + "/checkpoints";
    }
  }
  LOCO_RETURN_IF_ERROR(StartPrometheus());
  std::string coordinator;
  LOCO_RETURN_IF_ERROR(StartCoordinator(&coordinator));
  LOCO_RETURN_IF_ERROR(StartServers(coordinator));
  LOCO_RETURN_IF_ERROR(StartWorkers(coordinator));
  const Status result = Supervise(started);
  StopAll();
  if (!result.ok()) return result;
  LOCO_RETURN_IF_ERROR(CheckCleanShutdown());
  *summary = Summarize(started);
  return Status::Ok();
}

Status Launcher::StartPrometheus() {
  if (options_.prometheus_binary.empty()) return Status::Ok();
  prometheus_ = std::make_unique<LocalPrometheus>(options_.prometheus_binary,
                                                  options_.log_dir + "/prometheus");
  LOCO_RETURN_IF_ERROR(prometheus_->Start(static_cast<int>(options_.startup_timeout_s)));
  std::printf("prometheus: %s (scraping every process of this run; data in %s/prometheus)\n",
              prometheus_->url().c_str(), options_.log_dir.c_str());
  std::fflush(stdout);
  return Status::Ok();
}

Status Launcher::StartServers(const std::string& coordinator) {
  for (int shard = 0; shard < options_.servers; ++shard) {
    const std::string name = "server-" + std::to_string(shard);
    std::vector<std::string> argv = ServerArgv(options_, shard, coordinator);
    AddMetrics(&argv);
    server_argv_.push_back(argv);
    std::string address;
    servers_.emplace_back();
    LOCO_RETURN_IF_ERROR(StartListener(name, argv, {"server", name}, &servers_.back(), &address));
    server_address_.push_back(address);
  }
  return Status::Ok();
}

Status Launcher::StartWorkers(const std::string& coordinator) {
  worker_argv_ = WorkerArgv(options_, coordinator, total_steps_);
  // Step 0 waits (bounded) for all W initial workers, so that every run
  // splits the first batches the same way.
  for (int i = 0; i < options_.workers; ++i) LOCO_RETURN_IF_ERROR(StartWorker(std::nullopt));
  worker_states_.resize(workers_.size());
  StartJoiners();
  return Status::Ok();
}

void Launcher::StartJoiners() {
  // Joiners start now, in the order of their steps: a new process needs
  // about a second to load its data, which would otherwise put its join
  // wherever that second ends.
  std::vector<Fault*> joins;
  for (Fault& fault : options_.faults) {
    if (fault.kind == Fault::Kind::kJoinWorker) joins.push_back(&fault);
  }
  std::stable_sort(joins.begin(), joins.end(),
                   [](const Fault* a, const Fault* b) { return a->step < b->step; });
  for (Fault* fault : joins) {
    fault->fired = true;
    if (fault->step >= total_steps_) {
      Event("fault " + fault->ToString() + ": training ends at step " +
            std::to_string(total_steps_) + "; skipped");
      continue;
    }
    if (Status s = StartWorker(fault->step); !s.ok()) {
      Event("fault " + fault->ToString() + ": could not start a worker: " + s.message());
      continue;
    }
    WorkerState joiner;
    joiner.awaiting_join = true;
    joiner.join_fault = fault->ToString();
    worker_states_.push_back(std::move(joiner));
  }
}

Status Launcher::Supervise(Clock::time_point started) {
  ProgressView view(options_.progress, stdout,
                    std::chrono::milliseconds(options_.progress_period_ms));
  const Clock::time_point deadline = started + std::chrono::seconds(options_.timeout_s);
  Status result = Status::Ok();
  while (true) {
    if (interrupted_ && *interrupted_) {
      result = Aborted("interrupted: stopped every child");
      break;
    }
    if (Clock::now() > deadline) {
      result = DeadlineExceeded("training did not finish within --timeout-s=" +
                                std::to_string(options_.timeout_s));
      break;
    }
    // Workers report every step; 50 ms keeps the loop cheap and the view fresh.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const WorkerTally tally = PollWorkers();
    // A joiner still waiting for its step does not hold the run open: if
    // everyone else ended, the cluster will never reach its step.
    const bool finished = tally.ended + tally.awaiting == workers_.size();
    if (finished && tally.done == 0) {
      result = AllWorkersLost();
      break;
    }
    result = CheckCoordinatorAndServers(tally.max_step);
    if (!result.ok()) break;
    if (!finished) {
      FireFaults(tally.max_step);
      worker_states_.resize(workers_.size());
    }
    view.Update(Snapshot(tally), finished);
    if (finished) {
      ReportJoinersThatNeverJoined(tally.max_step);
      ReportUnfinishedOutage(tally.max_step);
      break;
    }
  }
  view.Finish();
  return result;
}

Launcher::WorkerTally Launcher::PollWorkers() {
  WorkerTally tally;
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::vector<std::string> lines;
    workers_[i]->ReadLines(&lines);
    for (const auto& line : lines) {
      if (auto event = ParseFlatJson(line)) HandleWorkerEvent(i, *event);
    }
    AccountForWorkerExit(i);
    const WorkerState& state = worker_states_[i];
    if (state.ended) ++tally.ended;
    if (state.ended && state.done) ++tally.done;
    if (!state.ended && state.awaiting_join) ++tally.awaiting;
    tally.max_step = std::max(tally.max_step, state.step);
  }
  return tally;
}

void Launcher::RecordWorkerProgress(const std::string& kind, const FlatJson& event,
                                    WorkerState* state) {
  state->step = static_cast<uint64_t>(
      JsonNumber(event, kind == "done" ? "steps" : "step", double(state->step)));
  state->push_wire = JsonNumber(event, "push_wire_bytes", state->push_wire);
  state->push_fp32 = JsonNumber(event, "push_fp32_bytes", state->push_fp32);
  state->pull_wire = JsonNumber(event, "pull_wire_bytes", state->pull_wire);
  state->pull_fp32 = JsonNumber(event, "pull_fp32_bytes", state->pull_fp32);
  if (kind == "step") {
    state->loss = JsonNumber(event, "loss", state->loss);
    if (state->first_losses.size() < kLossWindow) state->first_losses.push_back(state->loss);
    state->last_losses.push_back(state->loss);
    if (state->last_losses.size() > kLossWindow) state->last_losses.pop_front();
    state->samples_per_s = JsonNumber(event, "samples_per_s", state->samples_per_s);
  } else {
    state->done = true;
    state->test_accuracy = JsonNumber(event, "test_accuracy", -1);
  }
}

// The events of worker/worker_events.h.
void Launcher::HandleWorkerEvent(size_t worker, const FlatJson& event) {
  WorkerState& state = worker_states_[worker];
  const std::string& name = workers_[worker]->name();
  const std::string kind = Field(event, "event");
  if (kind == "step" || kind == "done") {
    RecordWorkerProgress(kind, event, &state);
  } else if (kind == "eval") {
    if (options_.progress == ProgressView::Mode::kBar) std::fputs("\r\033[K", stdout);
    std::printf("epoch %s: test accuracy %.2f%% (step %s)\n", Field(event, "epoch").c_str(),
                100 * JsonNumber(event, "test_accuracy", 0), Field(event, "step").c_str());
  } else if (kind == "blas_kernels" && !blas_advice_shown_) {
    // Every worker on this machine says the same: once is enough.
    blas_advice_shown_ = true;
    if (options_.progress == ProgressView::Mode::kBar) std::fputs("\r\033[K", stdout);
    const BlasAdvice advice{Field(event, "core"), Field(event, "wider"), Field(event, "vectors")};
    std::printf("note: on the workers, %s\n", advice.ToString().c_str());
    std::fflush(stdout);
  } else if (kind == "metrics") {
    ScrapeWorker(name, event);
  } else if (kind == "left") {
    state.left = true;
  } else if (kind == "expired") {
    Event(name + " was removed at step " + Field(event, "step") +
          " (missed heartbeats); it rejoins");
  } else if (kind == "joined" && Field(event, "rejoin") == "true") {
    Event(name + " rejoined as worker " + Field(event, "worker") + " at step " +
          Field(event, "step"));
  } else if (kind == "joined" && state.awaiting_join) {
    state.awaiting_join = false;
    ++faults_so_far_.workers_joined;
    Event("fault " + state.join_fault + ": " + name + " joined as worker " +
          Field(event, "worker") + " at step " + Field(event, "step"));
  }
}

void Launcher::AccountForWorkerExit(size_t worker) {
  WorkerState& state = worker_states_[worker];
  ChildProcess& child = *workers_[worker];
  if (state.ended || !child.Poll()) return;
  state.ended = true;
  if (child.exit_code() == 0 && state.done) return;  // finished
  if (state.left) {
    ++faults_so_far_.workers_left;
    Event(child.name() + " left at step " + std::to_string(state.step) +
          "; training goes on without it");
    return;
  }
  ++faults_so_far_.workers_lost;
  last_lost_worker_ = &child;
  Event(child.name() + " lost (" + child.DescribeExit() + ") at step " +
        std::to_string(state.step) + "; training goes on without it");
}

Status Launcher::AllWorkersLost() const {
  Status why = last_lost_worker_ != nullptr
                   ? ChildFailure(*last_lost_worker_,
                                  "exited early with " + last_lost_worker_->DescribeExit())
                   : Aborted("no worker is left");
  return Aborted("every worker was lost before finishing, so training cannot complete; " +
                 why.message());
}

Status Launcher::CheckCoordinatorAndServers(uint64_t max_step) {
  LOCO_RETURN_IF_ERROR(CheckCoordinator(max_step));
  for (size_t shard = 0; shard < servers_.size(); ++shard) {
    if (servers_[shard]->Poll()) LOCO_RETURN_IF_ERROR(RestartServer(shard, max_step));
  }
  return Status::Ok();
}

ProgressSnapshot Launcher::Snapshot(const WorkerTally& tally) const {
  ProgressSnapshot snapshot;
  snapshot.total_steps = total_steps_;
  // Loss and rate of the running workers; once all have ended, the line
  // says how the run ended: the loss of all that reported, the rate the
  // finished ones last reported, and how many finished.
  double running_loss = 0, all_loss = 0, finished_rate = 0;
  int running = 0, reported = 0;
  for (const WorkerState& state : worker_states_) {
    snapshot.step = std::max(snapshot.step, state.step);
    snapshot.samples_per_s += state.ended ? 0 : state.samples_per_s;
    finished_rate += state.done ? state.samples_per_s : 0;
    snapshot.wire_bytes += state.push_wire + state.pull_wire;
    snapshot.fp32_bytes += state.push_fp32 + state.pull_fp32;
    if (state.step == 0) continue;
    all_loss += state.loss;
    ++reported;
    if (!state.ended) {
      running_loss += state.loss;
      ++running;
    }
  }
  if (running) {
    snapshot.loss = running_loss / running;
  } else if (reported) {
    snapshot.loss = all_loss / reported;
  }
  snapshot.workers = static_cast<int>(workers_.size() - tally.ended - tally.awaiting);
  if (snapshot.workers == 0) {
    snapshot.samples_per_s = finished_rate;
    snapshot.workers = static_cast<int>(tally.done);
  }
  return snapshot;
}

void Launcher::ReportJoinersThatNeverJoined(uint64_t max_step) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    const WorkerState& state = worker_states_[i];
    if (state.ended || !state.awaiting_join) continue;
    Event("fault " + state.join_fault + ": " + workers_[i]->name() +
          " never joined: training ended at step " + std::to_string(max_step));
  }
}

Status Launcher::CheckCleanShutdown() const {
  std::vector<const ChildProcess*> infrastructure;
  // A coordinator still down from a kill-coordinator fault died by plan.
  if (!coordinator_outage_.down()) infrastructure.push_back(coordinator_.get());
  for (const auto& server : servers_) infrastructure.push_back(server.get());
  for (const ChildProcess* child : infrastructure) {
    if (child->exit_code() != 0) {
      return ChildFailure(*child, "did not shut down cleanly: " + child->DescribeExit());
    }
  }
  return Status::Ok();
}

LaunchSummary Launcher::Summarize(Clock::time_point started) const {
  LaunchSummary summary = faults_so_far_;
  summary.wall_s = std::chrono::duration<double>(Clock::now() - started).count();
  int reporting = 0;
  for (const WorkerState& state : worker_states_) {
    summary.steps = std::max(summary.steps, state.step);
    summary.push_wire_bytes += state.push_wire;
    summary.push_fp32_bytes += state.push_fp32;
    summary.pull_wire_bytes += state.pull_wire;
    summary.pull_fp32_bytes += state.pull_fp32;
    if (state.test_accuracy >= 0) summary.test_accuracy = state.test_accuracy;
    if (state.first_losses.empty()) continue;
    summary.first_loss += Mean(state.first_losses);
    summary.final_loss += Mean(state.last_losses);
    ++reporting;
  }
  if (reporting) {
    summary.first_loss /= reporting;
    summary.final_loss /= reporting;
  }
  return summary;
}

}  // namespace loco
