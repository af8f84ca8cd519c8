#include "server/grpc_server_start.h"

#include <grpcpp/health_check_service_interface.h>

namespace loco {

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

StatusOr<GrpcServerHandle> StartGrpcServer(const std::string& host, int port,
                                           const std::vector<grpc::Service*>& services,
                                           int max_message_mb,
                                           const std::vector<std::string>& health_names) {
  if (port < 0 || port > 65535) {
    return InvalidArgument("port " + std::to_string(port) + " is outside [0, 65535]");
  }
  if (max_message_mb < 1 || max_message_mb > 2047) {
    return InvalidArgument("max message size " + std::to_string(max_message_mb) +
                           " MiB is outside [1, 2047] (gRPC limits messages to < 2 GiB)");
  }
  // A process-wide gRPC setting; it only has to be on before BuildAndStart.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  GrpcServerHandle handle;
  const std::string address = JoinHostPort(host, port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &handle.port);
  const int max_bytes = max_message_mb * 1024 * 1024;
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  handle.server = builder.BuildAndStart();
  if (!handle.server || handle.port == 0) {
    return Unavailable("could not listen on " + address +
                       " (address in use, or host not local?)");
  }
  if (auto* health = handle.server->GetHealthCheckService()) {
    health->SetServingStatus(true);
    for (const auto& name : health_names) health->SetServingStatus(name, true);
  }
  return handle;
}

}  // namespace loco
