// loco-health-probe: asks one gRPC server the standard health question
// (grpc.health.v1.Health/Check) over a plaintext channel, as Kubernetes'
// native gRPC probe does, for places that cannot use that probe: the image's
// HEALTHCHECK, exec probes, compose files and scripts.
//
// Exit codes: 0 when the server answers SERVING; 1 when it answers anything
// else, does not answer within --timeout-ms, or refuses the call (the
// message on stderr says which); 2 on invalid flags. Plaintext only: servers
// whose main port uses TLS serve the health service on a plaintext
// --health-port for exactly this purpose.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <string>

#include "common/flags.h"
#include "common/host_port.h"
#include "health.grpc.pb.h"

namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

const char* StatusName(HealthCheckResponse::ServingStatus s) {
  switch (s) {
    case HealthCheckResponse::SERVING: return "SERVING";
    case HealthCheckResponse::NOT_SERVING: return "NOT_SERVING";
    case HealthCheckResponse::SERVICE_UNKNOWN: return "SERVICE_UNKNOWN";
    default: return "UNKNOWN";
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string address, service;
  int64_t timeout_ms = 0;
  bool quiet = false;
  loco::FlagSet flags("loco-health-probe");
  flags.AddString("address", "LOCO_PROBE_ADDRESS", "",
                  "host:port of the gRPC server to ask (plaintext; required)", loco::CheckHostPort,
                  &address);
  flags.AddString("service", "LOCO_PROBE_SERVICE", "",
                  "service name to ask about (empty = the server as a whole)", &service);
  flags.AddInt("timeout-ms", "LOCO_PROBE_TIMEOUT_MS", 2000, 1, 600000,
               "deadline of the health call, connection included", &timeout_ms);
  flags.AddBool("quiet", "LOCO_PROBE_QUIET", false, "print nothing when the answer is SERVING",
                &quiet);
  if (std::optional<int> exit_code = flags.ParseCommandLine(argc, argv, std::cout, std::cerr)) {
    return *exit_code;
  }
  if (address.empty()) {
    std::cerr << "loco-health-probe: --address (or $LOCO_PROBE_ADDRESS) is required: host:port\n";
    return 2;
  }

  auto stub = Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  // Wait for the connection within the deadline rather than failing at the
  // first refused connect: a server that is starting up answers late, not never.
  ctx.set_wait_for_ready(true);
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  const grpc::Status status = stub->Check(&ctx, request, &response);
  const std::string what = address + (service.empty() ? "" : " service '" + service + "'");
  if (!status.ok()) {
    std::cerr << "loco-health-probe: " << what << ": no answer: "
              << (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                      ? "no connection or reply within " + std::to_string(timeout_ms) + " ms"
                      : status.error_message())
              << " (gRPC code " << status.error_code() << ")\n";
    return 1;
  }
  if (response.status() != HealthCheckResponse::SERVING) {
    std::cerr << "loco-health-probe: " << what << ": " << StatusName(response.status()) << "\n";
    return 1;
  }
  if (!quiet) std::cout << what << ": SERVING\n";
  return 0;
}
