#include "worker/launch/launcher.h"

#include <poll.h>
#include <sys/stat.h>

#include <chrono>
#include <deque>
#include <cstdio>
#include <thread>

#include "common/log.h"
#include "worker/launch/flat_json.h"

namespace loco {

struct Launcher::WorkerState {
  bool done = false;
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

Status Launcher::StartListener(const std::string& name, std::vector<std::string> argv,
                               std::string* address) {
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

void Launcher::StopAll() {
  // Workers first (they leave cleanly on SIGTERM), then servers, then the coordinator.
  for (auto& w : workers_) w->Signal(SIGTERM);
  for (auto& w : workers_) w->Stop(5000);
  for (auto it = infra_.rbegin(); it != infra_.rend(); ++it) (*it)->Signal(SIGTERM);
  for (auto it = infra_.rbegin(); it != infra_.rend(); ++it) (*it)->Stop(10000);
}

Status Launcher::Run(LaunchSummary* summary) {
  auto t0 = std::chrono::steady_clock::now();
  ::mkdir(o_.log_dir.c_str(), 0755);
  const std::string coord_bin = o_.bin_dir + "/loco-coordinator";
  const std::string server_bin = o_.bin_dir + "/loco-server";
  const std::string worker_bin = o_.bin_dir + "/loco-worker";

  std::string coordinator;
  LOCO_RETURN_IF_ERROR(StartListener(
      "coordinator",
      {coord_bin, "--port=0", "--num-servers=" + std::to_string(o_.servers),
       "--heartbeat-timeout-ms=" + std::to_string(o_.heartbeat_timeout_ms)},
      &coordinator));
  for (int k = 0; k < o_.servers; ++k) {
    std::vector<std::string> argv = {server_bin, "--port=0", "--shard-id=" + std::to_string(k),
                                     "--num-servers=" + std::to_string(o_.servers),
                                     "--coordinator=" + coordinator,
                                     "--lr=" + std::to_string(o_.lr)};
    if (!o_.pull_codec.empty()) argv.push_back("--pull-codec=" + o_.pull_codec);
    argv.insert(argv.end(), o_.server_args.begin(), o_.server_args.end());
    std::string addr;
    LOCO_RETURN_IF_ERROR(StartListener("server-" + std::to_string(k), argv, &addr));
  }
  const uint64_t total = TotalSteps();
  for (int w = 0; w < o_.workers; ++w) {
    std::vector<std::string> argv = {worker_bin,
                                     "--coordinator=" + coordinator,
                                     "--name=worker-" + std::to_string(w),
                                     "--codec=" + o_.codec,
                                     "--bits=" + std::to_string(o_.bits),
                                     "--block-size=" + std::to_string(o_.block_size),
                                     "--global-batch=" + std::to_string(o_.global_batch),
                                     "--steps=" + std::to_string(total),
                                     "--seed=" + std::to_string(o_.seed)};
    if (!o_.hidden.empty()) argv.push_back("--hidden=" + o_.hidden);
    if (!o_.data_dir.empty()) argv.push_back("--data-dir=" + o_.data_dir);
    argv.insert(argv.end(), o_.worker_args.begin(), o_.worker_args.end());
    auto child = std::make_unique<ChildProcess>("worker-" + std::to_string(w), argv,
                                                o_.log_dir + "/worker-" + std::to_string(w) + ".log");
    LOCO_RETURN_IF_ERROR(child->Start());
    workers_.push_back(std::move(child));
  }

  std::vector<WorkerState> state(workers_.size());
  ProgressView view(o_.progress, stdout, std::chrono::milliseconds(o_.progress_period_ms));
  auto deadline = t0 + std::chrono::seconds(o_.timeout_s);
  Status result = Status::Ok();
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
    size_t done = 0;
    for (size_t i = 0; i < workers_.size(); ++i) {
      std::vector<std::string> lines;
      workers_[i]->ReadLines(&lines);
      for (const auto& line : lines) {
        auto ev = ParseFlatJson(line);
        if (!ev) continue;
        const std::string& kind = (*ev)["event"];
        WorkerState& s = state[i];
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
        }
      }
      if (workers_[i]->Poll()) {
        if (workers_[i]->exit_code() != 0 || !state[i].done) {
          result = ChildFailure(*workers_[i], "exited early with " + workers_[i]->DescribeExit());
          break;
        }
        ++done;
      }
    }
    if (!result.ok()) break;
    for (auto& c : infra_) {
      if (c->Poll()) {
        result = ChildFailure(*c, "exited unexpectedly with " + c->DescribeExit());
        break;
      }
    }
    if (!result.ok()) break;
    ProgressSnapshot snap;
    snap.total_steps = total;
    int reporting = 0;
    for (auto& s : state) {
      snap.step = std::max(snap.step, s.step);
      snap.samples_per_s += s.samples_per_s;
      snap.wire_bytes += s.push_wire + s.pull_wire;
      snap.fp32_bytes += s.push_fp32 + s.pull_fp32;
      if (s.step > 0) {
        snap.loss += s.loss;
        ++reporting;
      }
    }
    if (reporting) snap.loss /= reporting;
    snap.workers = static_cast<int>(workers_.size() - done);
    bool finished = done == workers_.size();
    view.Update(snap, finished);
    if (finished) break;
  }
  view.Finish();
  StopAll();
  if (!result.ok()) return result;
  for (auto& c : infra_) {
    if (c->exit_code() != 0) {
      return ChildFailure(*c, "did not shut down cleanly: " + c->DescribeExit());
    }
  }
  LaunchSummary sum;
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
      .Add("pull_fp32_bytes", pull_fp32_bytes);
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
  return buf;
}

}  // namespace loco
