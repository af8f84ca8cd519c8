#include "metrics/metrics_endpoint_flags.h"

#include "common/host_port.h"

namespace loco {

void AddMetricsEndpointFlags(FlagSet& flags, std::string* host, int64_t* port) {
  flags.AddString("metrics-host", "LOCO_METRICS_HOST", MetricsEndpointOptions().host,
                  "address the Prometheus /metrics endpoint listens on", CheckHost, host);
  flags.AddInt("metrics-port", "LOCO_METRICS_PORT", 0, kAnyFreeMetricsPort, 65535,
               "port of the Prometheus /metrics endpoint (0 = off, -1 = any free port, announced "
               "on stdout)",
               port);
}

MetricsEndpointOptions MetricsEndpointOptionsFromFlags(const std::string& host, int64_t port) {
  MetricsEndpointOptions options;
  options.enabled = port != 0;
  options.host = host;
  options.port = port == kAnyFreeMetricsPort ? 0 : static_cast<int>(port);
  return options;
}

StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpointIfEnabled(
    const MetricsEndpointOptions& options, std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> before_collect) {
  if (!options.enabled) return std::unique_ptr<MetricsEndpoint>();
  return MetricsEndpoint::Start(options.host, options.port, std::move(registry),
                                std::move(before_collect));
}

}  // namespace loco
