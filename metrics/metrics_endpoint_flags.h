// The /metrics endpoint as every binary configures it: the flags
// --metrics-host and --metrics-port, the MetricsEndpointOptions they mean,
// and starting the endpoint only when they enable it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <prometheus/registry.h>

#include "common/flags.h"
#include "common/status.h"
#include "metrics/metrics_endpoint.h"

namespace loco {

// --metrics-port's value for "any free port": the system picks one when the
// endpoint binds, and the program announces the port it got on stdout
// ("METRICS host:port" from the gRPC services, a "metrics" event from
// loco-worker). A supervisor that must know the port (loco-launch's local
// Prometheus) asks for this rather than picking a free port itself and
// handing it over, which another process could take in between.
inline constexpr int64_t kAnyFreeMetricsPort = -1;

// Registers --metrics-host / $LOCO_METRICS_HOST (default 127.0.0.1) and
// --metrics-port / $LOCO_METRICS_PORT (default 0 = off, in [-1, 65535];
// kAnyFreeMetricsPort), bound to `*host` and `*port`, in that order.
void AddMetricsEndpointFlags(FlagSet& flags, std::string* host, int64_t* port);

// What those flags ask for once parsed: enabled when the port is not 0,
// on port 0 of MetricsEndpoint (any free one) for kAnyFreeMetricsPort.
MetricsEndpointOptions MetricsEndpointOptionsFromFlags(const std::string& host, int64_t port);

// MetricsEndpoint::Start on the options' address when they are enabled;
// nullptr (and OK) when they are not. `before_collect` as in Start.
StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpointIfEnabled(
    const MetricsEndpointOptions& options, std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> before_collect = nullptr);

}  // namespace loco
