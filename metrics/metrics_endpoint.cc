#include "metrics/metrics_endpoint.h"

#include <netdb.h>
#include <prometheus/exposer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "common/host_port.h"
#include "metrics/process_memory.h"
#include "metrics/thread_stack_floor.h"

namespace loco {
namespace {

// Runs the refresh hook, then hands out the registry's families and the
// process's memory.
class RefreshingCollectable final : public prometheus::Collectable {
 public:
  RefreshingCollectable(std::shared_ptr<prometheus::Registry> registry,
                        std::function<void()> before_collect)
      : registry_(std::move(registry)), before_collect_(std::move(before_collect)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    if (before_collect_) before_collect_();
    std::vector<prometheus::MetricFamily> families = registry_->Collect();
    for (prometheus::MetricFamily& f : ProcessMemoryFamilies()) families.push_back(std::move(f));
    return families;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::function<void()> before_collect_;
};

// Connects to host:port and closes at once, every 10 ms, until `stop` is
// set or 2 s (civetweb's whole poll quantum) have passed: each connection
// ends the listening thread's poll, so that it sees the stop flag now.
// A wildcard host is reached through loopback.
void NudgeListener(const std::string& host, int port, const std::atomic<bool>& stop) {
  const std::string target = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(target.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  for (int attempt = 0; attempt < 200 && !stop.load(); ++attempt) {
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {  // "localhost": v4 and v6
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      (void)connect(fd, a->ai_addr, a->ai_addrlen);
      close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  freeaddrinfo(found);
}

}  // namespace

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> before_collect) {
  // Also links the stack floor (metrics/thread_stack_floor.h) into every
  // binary that serves metrics.
  if (FlooredStackSize(0) < kMinThreadStackBytes) {
    return Internal("the thread stack floor for the metrics server is not in effect");
  }
  if (host.empty()) {
    return InvalidArgument("metrics host is empty; expected an address such as 127.0.0.1");
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("metrics port " + std::to_string(port) +
                           " is out of range; expected 0 (any free port) .. 65535");
  }
  if (!registry) return InvalidArgument("metrics endpoint needs a registry");
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  e->host_ = host;
  e->collectable_ =
      std::make_shared<RefreshingCollectable>(std::move(registry), std::move(before_collect));
  const std::string bind = JoinHostPort(host, port);
  try {
    // civetweb throws (CivetException) when it cannot bind; nothing may
    // escape this module, so it becomes a Status here.
    e->exposer_ = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2);
  } catch (const std::exception& ex) {
    return Unavailable("cannot serve metrics on " + bind + ": " + ex.what() +
                       " (is the port in use? choose another --metrics-port)");
  }
  const std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return Unavailable("metrics server on " + bind + " reports no listening port");
  }
  e->port_ = ports.front();
  e->exposer_->RegisterCollectable(e->collectable_);
  return e;
}

MetricsEndpoint::~MetricsEndpoint() {
  // Stop serving before the collectable (and its hook's targets) go away.
  // civetweb's stop waits for its listening thread, which polls in 2 s
  // quanta: without the nudge every endpoint took up to 2 s to close (a
  // server's SIGTERM, every test that starts one).
  std::atomic<bool> stopped{false};
  std::thread nudge([this, &stopped] { NudgeListener(host_, port_, stopped); });
  exposer_.reset();
  stopped = true;
  nudge.join();
}

std::string MetricsEndpoint::address() const { return JoinHostPort(host_, port_); }

}  // namespace loco
