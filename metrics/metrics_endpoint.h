// MetricsEndpoint: serves one prometheus::Registry as Prometheus text on
// http://host:port/metrics (prometheus-cpp's Exposer, a civetweb server).
//
// Each process part (ParameterServer, CoordinatorServer, a worker binary)
// owns its own registry and endpoint; nothing is process-wide, so tests run
// several in one process. `before_collect` (optional) runs on the exposer's
// thread at the start of every scrape, to refresh gauges whose truth lives
// elsewhere (e.g. the coordinator's membership, which expires workers
// lazily); it must be thread-safe and must outlive the endpoint. Every
// scrape also carries the process's memory (metrics/process_memory.h).
//
// Destruction stops the HTTP server. civetweb's listening thread polls in
// 2 s quanta and its stop waits for that thread, so the destructor
// connects to the port meanwhile (loopback for a wildcard host) to end
// the poll: it takes milliseconds, not up to 2 s.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <prometheus/registry.h>

#include "common/status.h"

namespace prometheus {
class Exposer;
}

namespace loco {

struct MetricsEndpointOptions {
  bool enabled = false;
  std::string host = "127.0.0.1";  // loopback by default: metrics are not for the world
  int port = 0;                    // 0 = any free port (see MetricsEndpoint::port())
};

class MetricsEndpoint {
 public:
  // Binds and starts serving. InvalidArgument for a bad host or port,
  // Unavailable when the address cannot be bound. Never throws.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
      std::function<void()> before_collect = nullptr);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }  // the bound port
  // "host:port" with brackets around IPv6 literals.
  std::string address() const;
  std::string url() const { return "http://" + address() + "/metrics"; }

 private:
  MetricsEndpoint() = default;

  std::string host_;
  int port_ = 0;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace loco
