#include "launch/launcher.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>

#include "common/blas_advice.h"
#include "common/log.h"
#include "launch/flat_json.h"

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
double Mean(const auto& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / double(v.size());
}
std::string PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? "0" : address.substr(colon + 1);
}
}  // namespace

Launcher::Launcher(LaunchOptions options, const volatile std::sig_atomic_t* interrupted)
    : o_(std::move(options)), interrupted_(interrupted) {}

Launcher::~Launcher() { StopAll(); }

uint64_t Launcher::TotalSteps() const {
  if (o_.steps > 0) return static_cast<uint64_t>(o_.steps);
  return static_cast<uint64_t>(o_.epochs) *
         static_cast<uint64_t>((o_.train_examples + o_.global_batch - 1) / o_.global_batch);
}

Status Launcher::ChildFailure(const ChildProcess& c, const std::string& what) const {
  return Aborted(c.name() + " (pid " + std::to_string(c.pid()) + ") " + what + "; last lines of " +
                 c.log_path() + ":\n" + c.LogTail(12));
}

void Launcher::Event(const std::string& what) {
  std::printf("event: %s\n", what.c_str());
  std::fflush(stdout);
  sum_.events.push_back(what);
}

Status Launcher::StartListener(const std::string& name, std::vector<std::string> argv,
                               std::string* address, std::vector<std::string>* preamble) {
  auto child = std::make_unique<ChildProcess>(name, std::move(argv), o_.log_dir + "/" + name + ".log");
  LOCO_RETURN_IF_ERROR(child->Start());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o_.startup_timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (interrupted_ && *interrupted_) return Aborted("interrupted");
    auto line = child->WaitLine(200);
    if (line && line->rfind("LISTENING ", 0) == 0) {
      *address = line->substr(10);
      infra_.push_back(std::move(child));
      return Status::Ok();
    }
    if (line && preamble != nullptr) preamble->push_back(*line);
    if (child->Poll()) {
      Status s = ChildFailure(*child, "exited during startup with " + child->DescribeExit());
      infra_.push_back(std::move(child));
      return s;
    }
  }
  Status s = ChildFailure(*child, "did not report a listening port within " +
                                      std::to_string(o_.startup_timeout_s) + " s");
  infra_.push_back(std::move(child));
  return s;
}

Status Launcher::AddMetrics(const std::string& role, const std::string& name,
                            std::vector<std::string>* argv) {
  if (!prometheus_) return Status::Ok();
  auto port = LocalPrometheus::PickFreePort();
  if (!port.ok()) return port.status();
  argv->push_back("--metrics-port=" + std::to_string(*port));
  return prometheus_->AddTarget(role, name, *port);
}

Status Launcher::StartWorker(std::optional<uint64_t> join_at_step) {
  const std::string name = "worker-" + std::to_string(workers_.size());
  std::vector<std::string> argv = worker_argv_;
  // Before the user's --worker-args, which may override them.
  argv.insert(argv.begin() + 1,
              join_at_step ? "--join-at-step=" + std::to_string(*join_at_step)
                           : "--wait-for-workers=" + std::to_string(o_.workers));
  argv.insert(argv.begin() + 1, "--name=" + name);
  LOCO_RETURN_IF_ERROR(AddMetrics("worker", name, &argv));
  auto child = std::make_unique<ChildProcess>(name, argv, o_.log_dir + "/" + name + ".log");
  LOCO_RETURN_IF_ERROR(child->Start());
  workers_.push_back(std::move(child));
  return Status::Ok();
}

Status Launcher::RestartServer(size_t k, uint64_t at_step) {
  ChildProcess& dead = *infra_[1 + k];
  const std::string why = dead.DescribeExit();
  if (sum_.server_restarts >= o_.max_server_restarts) {
    return ChildFailure(dead, "exited with " + why + " and the run already restarted servers " +
                                  std::to_string(sum_.server_restarts) +
                                  " times (--max-server-restarts)");
  }
  if (o_.checkpoint_dir.empty()) {
    return ChildFailure(dead, "exited with " + why + "; without --checkpoint-dir its shard cannot "
                              "be restored, so training cannot complete");
  }
  ++sum_.server_restarts;
  // The same port: the workers and the coordinator know the server by address.
  std::vector<std::string> argv = server_argv_[k];
  for (auto& a : argv) {
    if (a == "--port=0") a = "--port=" + PortOf(server_address_[k]);
  }
  const std::string name =
      "server-" + std::to_string(k) + ".restart" + std::to_string(sum_.server_restarts);
  std::string address;
  std::vector<std::string> preamble;
  Status s = StartListener(name, argv, &address, &preamble);
  infra_[1 + k] = std::move(infra_.back());
  infra_.pop_back();
  if (!s.ok()) return s;
  uint64_t restored = 0;
  bool found = false;
  for (const auto& line : preamble) {
    if (line.rfind("RESTORED version=", 0) == 0) {
      restored = std::strtoull(line.c_str() + 17, nullptr, 10);
      found = true;
    }
  }
  if (!found) {
    return ChildFailure(*infra_[1 + k], "restarted but found no valid checkpoint; its shard is "
                                        "lost, so training cannot complete");
  }
  const uint64_t lost = at_step > restored ? at_step - restored : 0;
  sum_.server_steps_lost += lost;
  Event("server-" + std::to_string(k) + " died (" + why + ") at about step " +
        std::to_string(at_step) + "; restarted on " + address + ", resumed from its checkpoint "
        "at version " + std::to_string(restored) + ": about " + std::to_string(lost) +
        " step(s) of its shard's updates lost");
  return Status::Ok();
}

void Launcher::FireFaults(uint64_t max_step, const std::vector<WorkerState>& state) {
  for (Fault& f : o_.faults) {
    if (f.fired || max_step < f.step) continue;
    f.fired = true;
    switch (f.kind) {
      case Fault::Kind::kKillWorker: {
        int victim = -1;
        if (f.target >= 0) {
          victim = f.target < static_cast<int>(workers_.size()) ? f.target : -1;
        } else {
          for (int i = static_cast<int>(workers_.size()) - 1; i >= 0 && victim < 0; --i) {
            if (workers_[i]->running() && !state[i].done && !state[i].awaiting_join) victim = i;
          }
        }
        if (victim < 0 || !workers_[victim]->running()) {
          Event("fault " + f.ToString() + ": no such running worker; skipped");
          break;
        }
        workers_[victim]->Signal(SIGKILL);
        Event("fault " + f.ToString() + ": SIGKILL to " + workers_[victim]->name() +
              " at step " + std::to_string(max_step));
        break;
      }
      case Fault::Kind::kKillServer: {
        const size_t k = f.target >= 0 ? static_cast<size_t>(f.target) : 0;
        if (k >= server_argv_.size() || !infra_[1 + k]->running()) {
          Event("fault " + f.ToString() + ": no such running server; skipped");
          break;
        }
        infra_[1 + k]->Signal(SIGKILL);
        Event("fault " + f.ToString() + ": SIGKILL to server-" + std::to_string(k) +
              " at step " + std::to_string(max_step));
        break;
      }
      case Fault::Kind::kJoinWorker:
        break;  // its worker was started at launch (Run) and joins by itself
    }
  }
}

void Launcher::StopAll() {
  // Workers first (they leave cleanly on SIGTERM), then servers, then the coordinator.
  for (auto& w : workers_) w->Signal(SIGTERM);
  for (auto& w : workers_) w->Stop(5000);
  for (auto it = infra_.rbegin(); it != infra_.rend(); ++it) (*it)->Signal(SIGTERM);
  for (auto it = infra_.rbegin(); it != infra_.rend(); ++it) (*it)->Stop(10000);
  // Last, so that it scrapes the cluster until the end.
  if (prometheus_) prometheus_->Stop();
}

Status Launcher::Run(LaunchSummary* summary) {
  auto t0 = std::chrono::steady_clock::now();
  ::mkdir(o_.log_dir.c_str(), 0755);
  const std::string coord_bin = o_.bin_dir + "/loco-coordinator";
  const std::string server_bin = o_.bin_dir + "/loco-server";
  const std::string worker_bin = o_.bin_dir + "/loco-worker";
  for (const Fault& f : o_.faults) {
    if (f.kind == Fault::Kind::kKillServer && o_.checkpoint_dir.empty()) {
      o_.checkpoint_dir = o_.log_dir + "/checkpoints";
    }
  }

  if (!o_.prometheus_binary.empty()) {
    prometheus_ = std::make_unique<LocalPrometheus>(o_.prometheus_binary, o_.log_dir + "/prometheus");
    LOCO_RETURN_IF_ERROR(prometheus_->Start(static_cast<int>(o_.startup_timeout_s)));
    std::printf("prometheus: %s (scraping every process of this run; data in %s/prometheus)\n",
                prometheus_->url().c_str(), o_.log_dir.c_str());
    std::fflush(stdout);
  }
  std::string coordinator;
  std::vector<std::string> coord_argv = {
      coord_bin, "--port=0", "--num-servers=" + std::to_string(o_.servers),
      "--heartbeat-timeout-ms=" + std::to_string(o_.heartbeat_timeout_ms)};
  for (std::string& f : TransportSecurityArgs(o_.security, TransportRole::kServer)) {
    coord_argv.push_back(std::move(f));
  }
  LOCO_RETURN_IF_ERROR(AddMetrics("coordinator", "coordinator", &coord_argv));
  LOCO_RETURN_IF_ERROR(StartListener("coordinator", coord_argv, &coordinator));
  for (int k = 0; k < o_.servers; ++k) {
    std::vector<std::string> argv = {server_bin, "--port=0", "--shard-id=" + std::to_string(k),
                                     "--num-servers=" + std::to_string(o_.servers),
                                     "--coordinator=" + coordinator,
                                     "--lr=" + std::to_string(o_.lr)};
    for (std::string& f : TransportSecurityArgs(o_.security, TransportRole::kServerAndClient)) {
      argv.push_back(std::move(f));
    }
    if (!o_.pull_codec.empty()) argv.push_back("--pull-codec=" + o_.pull_codec);
    if (!o_.checkpoint_dir.empty()) {
      argv.push_back("--checkpoint-dir=" + o_.checkpoint_dir);
      if (o_.checkpoint_every > 0) {
        argv.push_back("--checkpoint-every=" + std::to_string(o_.checkpoint_every));
      }
    }
    argv.insert(argv.end(), o_.server_args.begin(), o_.server_args.end());
    LOCO_RETURN_IF_ERROR(AddMetrics("server", "server-" + std::to_string(k), &argv));
    std::string addr;
    server_argv_.push_back(argv);
    LOCO_RETURN_IF_ERROR(StartListener("server-" + std::to_string(k), argv, &addr));
    server_address_.push_back(addr);
  }
  const uint64_t total = TotalSteps();
  worker_argv_ = {worker_bin,
                  "--coordinator=" + coordinator,
                  "--codec=" + o_.codec,
                  "--bits=" + std::to_string(o_.bits),
                  "--block-size=" + std::to_string(o_.block_size),
                  "--global-batch=" + std::to_string(o_.global_batch),
                  "--steps=" + std::to_string(total),
                  "--seed=" + std::to_string(o_.seed)};
  for (std::string& f : TransportSecurityArgs(o_.security, TransportRole::kClient)) {
    worker_argv_.push_back(std::move(f));
  }
  if (!o_.hidden.empty()) worker_argv_.push_back("--hidden=" + o_.hidden);
  if (!o_.data_dir.empty()) worker_argv_.push_back("--data-dir=" + o_.data_dir);
  worker_argv_.insert(worker_argv_.end(), o_.worker_args.begin(), o_.worker_args.end());
  // Step 0 waits (bounded) for all W initial workers, so that every run
  // splits the first batches the same way.
  for (int w = 0; w < o_.workers; ++w) LOCO_RETURN_IF_ERROR(StartWorker(std::nullopt));
  std::vector<WorkerState> state(workers_.size());
  // Joiners start now, in the order of their steps: a new process needs
  // about a second to load its data, which would otherwise put its join
  // wherever that second ends.
  std::vector<Fault*> joins;
  for (Fault& f : o_.faults) {
    if (f.kind == Fault::Kind::kJoinWorker) joins.push_back(&f);
  }
  std::stable_sort(joins.begin(), joins.end(),
                   [](const Fault* a, const Fault* b) { return a->step < b->step; });
  for (Fault* f : joins) {
    f->fired = true;
    if (f->step >= total) {
      Event("fault " + f->ToString() + ": training ends at step " + std::to_string(total) +
            "; skipped");
      continue;
    }
    if (Status s = StartWorker(f->step); !s.ok()) {
      Event("fault " + f->ToString() + ": could not start a worker: " + s.message());
      continue;
    }
    WorkerState joiner;
    joiner.awaiting_join = true;
    joiner.join_fault = f->ToString();
    state.push_back(std::move(joiner));
  }
  ProgressView view(o_.progress, stdout, std::chrono::milliseconds(o_.progress_period_ms));
  auto deadline = t0 + std::chrono::seconds(o_.timeout_s);
  Status result = Status::Ok();
  const ChildProcess* last_lost = nullptr;
  while (true) {
    if (interrupted_ && *interrupted_) {
      result = Aborted("interrupted: stopped every child");
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      result = DeadlineExceeded("training did not finish within --timeout-s=" +
                                std::to_string(o_.timeout_s));
      break;
    }
    // Workers report every step; 50 ms keeps the loop cheap and the view fresh.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    size_t done = 0, ended = 0, awaiting = 0;
    uint64_t max_step = 0;
    for (size_t i = 0; i < workers_.size(); ++i) {
      std::vector<std::string> lines;
      workers_[i]->ReadLines(&lines);
      WorkerState& s = state[i];
      for (const auto& line : lines) {
        auto ev = ParseFlatJson(line);
        if (!ev) continue;
        const std::string& kind = (*ev)["event"];
        if (kind == "step" || kind == "done") {
          s.step = static_cast<uint64_t>(JsonNumber(*ev, kind == "done" ? "steps" : "step", double(s.step)));
          s.push_wire = JsonNumber(*ev, "push_wire_bytes", s.push_wire);
          s.push_fp32 = JsonNumber(*ev, "push_fp32_bytes", s.push_fp32);
          s.pull_wire = JsonNumber(*ev, "pull_wire_bytes", s.pull_wire);
          s.pull_fp32 = JsonNumber(*ev, "pull_fp32_bytes", s.pull_fp32);
        }
        if (kind == "step") {
          s.loss = JsonNumber(*ev, "loss", s.loss);
          if (s.first_losses.size() < kLossWindow) s.first_losses.push_back(s.loss);
          s.last_losses.push_back(s.loss);
          if (s.last_losses.size() > kLossWindow) s.last_losses.pop_front();
          s.samples_per_s = JsonNumber(*ev, "samples_per_s", s.samples_per_s);
        } else if (kind == "eval") {
          if (o_.progress == ProgressView::Mode::kBar) std::fputs("\r\033[K", stdout);
          std::printf("epoch %s: test accuracy %.2f%% (step %s)\n", (*ev)["epoch"].c_str(),
                      100 * JsonNumber(*ev, "test_accuracy", 0), (*ev)["step"].c_str());
        } else if (kind == "done") {
          s.done = true;
          s.test_accuracy = JsonNumber(*ev, "test_accuracy", -1);
        } else if (kind == "blas_kernels" && !blas_advice_shown_) {
          // Every worker on this machine says the same: once is enough.
          blas_advice_shown_ = true;
          if (o_.progress == ProgressView::Mode::kBar) std::fputs("\r\033[K", stdout);
          const BlasAdvice advice{(*ev)["core"], (*ev)["wider"], (*ev)["vectors"]};
          std::printf("note: on the workers, %s\n", advice.ToString().c_str());
          std::fflush(stdout);
        } else if (kind == "left") {
          s.left = true;
        } else if (kind == "expired") {
          Event(workers_[i]->name() + " was removed at step " + (*ev)["step"] +
                " (missed heartbeats); it rejoins");
        } else if (kind == "joined" && (*ev)["rejoin"] == "true") {
          Event(workers_[i]->name() + " rejoined as worker " + (*ev)["worker"] + " at step " +
                (*ev)["step"]);
        } else if (kind == "joined" && s.awaiting_join) {
          s.awaiting_join = false;
          ++sum_.workers_joined;
          Event("fault " + s.join_fault + ": " + workers_[i]->name() + " joined as worker " +
                (*ev)["worker"] + " at step " + (*ev)["step"]);
        }
      }
      if (!s.ended && workers_[i]->Poll()) {
        s.ended = true;
        if (workers_[i]->exit_code() == 0 && s.done) {
          // finished
        } else if (s.left) {
          ++sum_.workers_left;
          Event(workers_[i]->name() + " left at step " + std::to_string(s.step) +
                "; training goes on without it");
        } else {
          ++sum_.workers_lost;
          last_lost = workers_[i].get();
          Event(workers_[i]->name() + " lost (" + workers_[i]->DescribeExit() + ") at step " +
                std::to_string(s.step) + "; training goes on without it");
        }
      }
      if (s.ended) ++ended;
      if (s.ended && s.done) ++done;
      if (!s.ended && s.awaiting_join) ++awaiting;
      max_step = std::max(max_step, s.step);
    }
    // A joiner still waiting for its step does not hold the run open: if
    // everyone else ended, the cluster will never reach its step.
    const bool finished = ended + awaiting == workers_.size();
    if (finished && done == 0) {
      Status why = last_lost != nullptr
                       ? ChildFailure(*last_lost, "exited early with " + last_lost->DescribeExit())
                       : Aborted("no worker is left");
      result = Aborted("every worker was lost before finishing, so training cannot complete; " +
                       why.message());
      break;
    }
    if (infra_[0]->Poll()) {
      result = ChildFailure(*infra_[0], "exited unexpectedly with " + infra_[0]->DescribeExit());
      break;
    }
    for (size_t k = 0; k + 1 < infra_.size() && result.ok(); ++k) {
      if (infra_[1 + k]->Poll()) result = RestartServer(k, max_step);
    }
    if (!result.ok()) break;
    if (!finished) {
      FireFaults(max_step, state);
      state.resize(workers_.size());
    }
    ProgressSnapshot snap;
    snap.total_steps = total;
    // Loss of the running workers; once all have ended, of all that reported.
    double running_loss = 0, all_loss = 0;
    int running = 0, reported = 0;
    for (auto& s : state) {
      snap.step = std::max(snap.step, s.step);
      snap.samples_per_s += s.ended ? 0 : s.samples_per_s;
      snap.wire_bytes += s.push_wire + s.pull_wire;
      snap.fp32_bytes += s.push_fp32 + s.pull_fp32;
      if (s.step == 0) continue;
      all_loss += s.loss;
      ++reported;
      if (!s.ended) {
        running_loss += s.loss;
        ++running;
      }
    }
    if (running) {
      snap.loss = running_loss / running;
    } else if (reported) {
      snap.loss = all_loss / reported;
    }
    snap.workers = static_cast<int>(workers_.size() - ended - awaiting);
    view.Update(snap, finished);
    if (finished) {
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (state[i].ended || !state[i].awaiting_join) continue;
        Event("fault " + state[i].join_fault + ": " + workers_[i]->name() +
              " never joined: training ended at step " + std::to_string(max_step));
      }
      break;
    }
  }
  view.Finish();
  StopAll();
  if (!result.ok()) return result;
  for (auto& c : infra_) {
    if (c->exit_code() != 0) {
      return ChildFailure(*c, "did not shut down cleanly: " + c->DescribeExit());
    }
  }
  LaunchSummary sum = sum_;
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int reporting = 0;
  for (auto& s : state) {
    sum.steps = std::max(sum.steps, s.step);
    sum.push_wire_bytes += s.push_wire;
    sum.push_fp32_bytes += s.push_fp32;
    sum.pull_wire_bytes += s.pull_wire;
    sum.pull_fp32_bytes += s.pull_fp32;
    if (s.test_accuracy >= 0) sum.test_accuracy = s.test_accuracy;
    if (s.first_losses.empty()) continue;
    sum.first_loss += Mean(s.first_losses);
    sum.final_loss += Mean(s.last_losses);
    ++reporting;
  }
  if (reporting) {
    sum.first_loss /= reporting;
    sum.final_loss /= reporting;
  }
  *summary = sum;
  return Status::Ok();
}

std::string LaunchSummary::ToJson(const LaunchOptions& o) const {
  JsonWriter j;
  j.Add("test_accuracy", test_accuracy)
      .Add("steps", double(steps))
      .Add("wall_s", wall_s)
      .Add("first_loss", first_loss)
      .Add("final_loss", final_loss)
      .Add("servers", o.servers)
      .Add("workers", o.workers)
      .Add("codec", o.codec)
      .Add("bits", double(o.bits))
      .Add("push_wire_bytes", push_wire_bytes)
      .Add("push_fp32_bytes", push_fp32_bytes)
      .Add("pull_wire_bytes", pull_wire_bytes)
      .Add("pull_fp32_bytes", pull_fp32_bytes)
      .Add("workers_lost", workers_lost)
      .Add("workers_left", workers_left)
      .Add("workers_joined", workers_joined)
      .Add("server_restarts", server_restarts)
      .Add("server_steps_lost", double(server_steps_lost));
  return j.str();
}

std::string LaunchSummary::ToText() const {
  auto saved = [](double wire, double fp32) { return fp32 > 0 ? 100.0 * (1 - wire / fp32) : 0.0; };
  char buf[640];
  std::snprintf(buf, sizeof(buf),
                "finished %llu steps in %.1f s\n"
                "test accuracy: %s\n"
                "push (workers -> servers): %.1f MB on the wire vs %.1f MB in fp32 (%.1f%% saved, %.1fx)\n"
                "pull (servers -> workers): %.1f MB on the wire vs %.1f MB in fp32 (%.1f%% saved)\n"
                "total: %.1f MB vs %.1f MB (%.1f%% saved)\n",
                (unsigned long long)steps, wall_s,
                test_accuracy >= 0 ? (std::to_string(100 * test_accuracy).substr(0, 5) + "%").c_str() : "n/a",
                push_wire_bytes / 1e6, push_fp32_bytes / 1e6, saved(push_wire_bytes, push_fp32_bytes),
                push_wire_bytes > 0 ? push_fp32_bytes / push_wire_bytes : 0.0,
                pull_wire_bytes / 1e6, pull_fp32_bytes / 1e6, saved(pull_wire_bytes, pull_fp32_bytes),
                (push_wire_bytes + pull_wire_bytes) / 1e6, (push_fp32_bytes + pull_fp32_bytes) / 1e6,
                saved(push_wire_bytes + pull_wire_bytes, push_fp32_bytes + pull_fp32_bytes));
  std::string text = buf;
  if (workers_lost + workers_left + workers_joined + server_restarts > 0) {
    text += "faults: " + std::to_string(workers_lost) + " worker(s) lost, " +
            std::to_string(workers_left) + " left, " + std::to_string(workers_joined) +
            " joined; " + std::to_string(server_restarts) + " server restart(s), about " +
            std::to_string(server_steps_lost) +
            " step(s) of shard updates lost (between a crash and its checkpoint)\n";
    for (const auto& e : events) text += "  " + e + "\n";
  }
  return text;
}

}  // namespace loco
