#include "tests/fault/process_cluster.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <filesystem>
#include <thread>

#include "launch/local_prometheus.h"
#include "proto/loco.grpc.pb.h"

namespace loco::test {
namespace {

std::string Bin(const std::string& name) { return std::string(LOCO_BIN_DIR) + "/" + name; }

std::string PortOf(const std::string& address) {
  return address.substr(address.rfind(':') + 1);
}

std::unique_ptr<v1::ParameterServer::Stub> StubFor(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  return v1::ParameterServer::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

}  // namespace

const FlatJson* WorkerProcess::Find(const std::string& kind, const std::string& key,
                                    const std::string& value) const {
  for (const auto& e : events) {
    auto it = e.find("event");
    if (it == e.end() || it->second != kind) continue;
    if (!key.empty()) {
      auto k = e.find(key);
      if (k == e.end() || k->second != value) continue;
    }
    return &e;
  }
  return nullptr;
}

ProcessCluster::ProcessCluster(ProcessClusterOptions options) : options_(std::move(options)) {
  log_dir_ = std::string(::testing::TempDir()) + "/fault-" + options_.name + "-" +
             std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(log_dir_, ec);
  std::filesystem::create_directories(log_dir_, ec);
}

ProcessCluster::~ProcessCluster() {
  // Children first in reverse order of dependence; ChildProcess's destructor
  // SIGKILLs whatever still runs and reaps it.
  workers_.clear();
  servers_.clear();
  coordinator_.reset();
  retired_coordinators_.clear();
}

::testing::AssertionResult ProcessCluster::StartListener(const std::string& name,
                                                         std::vector<std::string> argv,
                                                         std::unique_ptr<ChildProcess>* out,
                                                         std::string* address,
                                                         std::string* preamble) {
  auto child = std::make_unique<ChildProcess>(name, std::move(argv), log_dir_ + "/" + name + ".log");
  Status s = child->Start();
  if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto line = child->WaitLine(200);
    if (line && line->rfind("LISTENING ", 0) == 0) {
      *address = line->substr(10);
      *out = std::move(child);
      return ::testing::AssertionSuccess();
    }
    if (line && preamble != nullptr) *preamble += *line;
    if (child->Poll()) {
      return ::testing::AssertionFailure() << name << " exited during startup: "
                                           << child->DescribeExit() << "\n" << child->LogTail(20);
    }
  }
  return ::testing::AssertionFailure() << name << " did not announce a port within 30 s\n"
                                       << child->LogTail(20);
}

::testing::AssertionResult ProcessCluster::Start() {
  coordinator_argv_ = {Bin("loco-coordinator"), "--port=0", "--insecure",
                       "--num-servers=" + std::to_string(options_.servers),
                       "--heartbeat-timeout-ms=" + std::to_string(options_.heartbeat_timeout_ms),
                       "--heartbeat-interval-ms=" + std::to_string(options_.heartbeat_interval_ms)};
  if (options_.restartable_coordinator) {
    auto port = LocalPrometheus::PickFreePort();
    if (!port.ok()) return ::testing::AssertionFailure() << port.status().ToString();
    coordinator_argv_[1] = "--port=" + std::to_string(*port);
    // The state directory keeps the incarnation and the worker-ticket key
    // the coordinator creates there on its first start, as a Compose or
    // Kubernetes volume does.
    std::error_code made;
    std::filesystem::create_directories(coordinator_state_dir(), made);
    if (made) {
      return ::testing::AssertionFailure()
             << "cannot make " << coordinator_state_dir() << ": " << made.message();
    }
    coordinator_argv_.push_back("--state-dir=" + coordinator_state_dir());
  }
  auto r = StartListener("coordinator", coordinator_argv_, &coordinator_, &coordinator_address_,
                         nullptr);
  if (!r) return r;
  for (int k = 0; k < options_.servers; ++k) {
    std::vector<std::string> argv = {Bin("loco-server"), "--port=0", "--insecure",
                                     "--shard-id=" + std::to_string(k),
                                     "--num-servers=" + std::to_string(options_.servers),
                                     "--coordinator=" + coordinator_address_,
                                     "--pull-codec=" + options_.pull_codec,
                                     "--step-poll-ms=20"};
    if (options_.checkpoints) {
      argv.push_back("--checkpoint-dir=" + checkpoint_dir());
      argv.push_back("--checkpoint-every=" + std::to_string(options_.checkpoint_every));
    }
    if (options_.restartable_coordinator) {
      argv.push_back("--reregister-ms=" + std::to_string(options_.reregister_ms));
    }
    argv.insert(argv.end(), options_.server_args.begin(), options_.server_args.end());
    std::unique_ptr<ChildProcess> child;
    std::string address;
    r = StartListener("server-" + std::to_string(k), argv, &child, &address, nullptr);
    if (!r) return r;
    servers_.push_back(std::move(child));
    server_argv_.push_back(argv);
    server_addresses_.push_back(address);
  }
  for (int w = 0; w < options_.workers; ++w) {
    r = StartWorker();
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ProcessCluster::StartWorker(const std::vector<std::string>& extra_args) {
  const std::string name = "worker-" + std::to_string(workers_.size());
  std::vector<std::string> argv = {Bin("loco-worker"), "--insecure",
                                   "--coordinator=" + coordinator_address_,
                                   "--name=" + name,
                                   "--hidden=" + options_.hidden,
                                   "--global-batch=" + std::to_string(options_.global_batch),
                                   "--steps=" + std::to_string(options_.steps),
                                   "--seed=1",
                                   "--report-params-crc",
                                   "--step-timeout-ms=60000"};
  argv.insert(argv.end(), options_.worker_args.begin(), options_.worker_args.end());
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  WorkerProcess w;
  w.child = std::make_unique<ChildProcess>(name, argv, log_dir_ + "/" + name + ".log");
  Status s = w.child->Start();
  if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  workers_.push_back(std::move(w));
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ProcessCluster::RestartServer(int k, std::string* restored) {
  std::vector<std::string> argv = server_argv_[k];
  for (auto& a : argv) {
    if (a == "--port=0") a = "--port=" + PortOf(server_addresses_[k]);
  }
  std::unique_ptr<ChildProcess> child;
  std::string address;
  restored->clear();
  auto r = StartListener("server-" + std::to_string(k) + ".restart" + std::to_string(++restarts_),
                         argv, &child, &address, restored);
  if (!r) return r;
  servers_[k] = std::move(child);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ProcessCluster::KillCoordinator() {
  coordinator_->Signal(SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!coordinator_->Poll()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return ::testing::AssertionFailure() << "the coordinator outlived SIGKILL for 10 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ProcessCluster::RestartCoordinator() {
  if (!options_.restartable_coordinator) {
    return ::testing::AssertionFailure() << "RestartCoordinator needs restartable_coordinator";
  }
  if (coordinator_->running()) {
    return ::testing::AssertionFailure() << "the coordinator is still running";
  }
  std::unique_ptr<ChildProcess> child;
  std::string address;
  auto r = StartListener("coordinator.restart" + std::to_string(++coordinator_restarts_),
                         coordinator_argv_, &child, &address, nullptr);
  if (!r) return r;
  retired_coordinators_.push_back(std::move(coordinator_));
  coordinator_ = std::move(child);
  if (PortOf(address) != PortOf(coordinator_address_)) {
    return ::testing::AssertionFailure() << "the coordinator came back on " << address
                                         << ", not on " << coordinator_address_;
  }
  return ::testing::AssertionSuccess();
}

void ProcessCluster::Poll() {
  for (auto& w : workers_) {
    std::vector<std::string> lines;
    w.child->ReadLines(&lines);
    for (const auto& line : lines) {
      auto ev = ParseFlatJson(line);
      if (!ev) continue;
      const std::string kind = (*ev)["event"];
      if (kind == "step") w.step = static_cast<uint64_t>(JsonNumber(*ev, "step", double(w.step)));
      if (kind == "done") {
        w.done = true;
        w.step = static_cast<uint64_t>(JsonNumber(*ev, "steps", double(w.step)));
      }
      w.events.push_back(std::move(*ev));
    }
  }
}

bool ProcessCluster::WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    Poll();
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool ProcessCluster::WaitForWorkersToExit(std::chrono::milliseconds timeout) {
  return WaitFor(
      [this] {
        for (auto& w : workers_) {
          if (!w.child->Poll()) return false;
        }
        Poll();  // the last lines before exit
        return true;
      },
      timeout);
}

uint64_t ProcessCluster::MaxStep() const {
  uint64_t m = 0;
  for (const auto& w : workers_) m = std::max(m, w.step);
  return m;
}

::testing::AssertionResult ProcessCluster::ShardVersions(std::vector<uint64_t>* versions) {
  versions->clear();
  for (int k = 0; k < options_.servers; ++k) {
    auto stub = StubFor(server_addresses_[k]);
    v1::ShardStatusRequest req;
    req.set_shard_id(static_cast<uint32_t>(k));
    v1::ShardStatusResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    grpc::Status s = stub->ShardStatus(&ctx, req, &resp);
    if (!s.ok()) {
      return ::testing::AssertionFailure() << "ShardStatus " << k << ": " << s.error_message();
    }
    versions->push_back(resp.version());
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ProcessCluster::ServerParamsCrc(std::string* crc_out) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (int k = 0; k < options_.servers; ++k) {
    auto stub = StubFor(server_addresses_[k]);
    v1::PullRequest req;
    req.set_shard_id(static_cast<uint32_t>(k));
    req.set_want_full(true);
    req.set_have_any(false);
    v1::PullResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    grpc::Status s = stub->Pull(&ctx, req, &resp);
    if (!s.ok()) return ::testing::AssertionFailure() << "Pull " << k << ": " << s.error_message();
    if (resp.params().codec() != v1::CODEC_FP32) {
      return ::testing::AssertionFailure() << "shard " << k << " sent codec "
                                           << resp.params().codec() << ", not fp32";
    }
    const std::string& d = resp.params().data();
    crc = crc32(crc, reinterpret_cast<const Bytef*>(d.data()), static_cast<uInt>(d.size()));
  }
  *crc_out = std::to_string(crc);
  return ::testing::AssertionSuccess();
}

std::string ProcessCluster::Logs() const {
  std::string out;
  auto add = [&out](const ChildProcess* c) {
    if (c != nullptr) out += "--- " + c->name() + " (" + c->log_path() + ")\n" + c->LogTail(15);
  };
  for (const auto& retired : retired_coordinators_) add(retired.get());
  add(coordinator_.get());
  for (const auto& s : servers_) add(s.get());
  for (const auto& w : workers_) add(w.child.get());
  return out;
}

}  // namespace loco::test
