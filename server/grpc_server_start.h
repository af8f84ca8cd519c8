// StartGrpcServer: the one way this project opens a listening gRPC server.
// Insecure credentials (local runs); the standard health service is enabled
// and reports SERVING for `health_names` once started; message-size limits
// are set deliberately (gRPC's 4 MiB default would refuse real shards).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

struct GrpcServerHandle {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (the kernel's choice when 0 was asked)
};

// `host` may be a name or an IPv4/IPv6 literal; `port` 0 picks a free port.
// The services must outlive the returned server.
StatusOr<GrpcServerHandle> StartGrpcServer(const std::string& host, int port,
                                           const std::vector<grpc::Service*>& services,
                                           int max_message_mb,
                                           const std::vector<std::string>& health_names);

// "host:port", with brackets around IPv6 literals.
std::string JoinHostPort(const std::string& host, int port);

}  // namespace loco
