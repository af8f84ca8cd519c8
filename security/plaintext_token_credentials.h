// PlaintextTokenCredentials: plaintext server credentials that still run a
// bearer-token check on every call (--insecure with --auth-token-file).
//
// gRPC 1.51's grpc::InsecureServerCredentials() aborts the process when an
// AuthMetadataProcessor is set on it, while the core's insecure credentials
// accept one. This wraps the core credentials and adapts the processor
// (called without an AuthContext: plaintext proves no identity).
//
// Not thread-safe until the server starts; then immutable.
#pragma once

#include <memory>
#include <string>

#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>

#include "security/bearer_token_processor.h"

namespace loco {

class PlaintextTokenCredentials : public grpc::ServerCredentials {
 public:
  explicit PlaintextTokenCredentials(std::shared_ptr<BearerTokenProcessor> processor);
  ~PlaintextTokenCredentials() override;
  PlaintextTokenCredentials(const PlaintextTokenCredentials&) = delete;
  PlaintextTokenCredentials& operator=(const PlaintextTokenCredentials&) = delete;

  // Only the processor given at construction is supported.
  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) override;

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override;

  std::shared_ptr<BearerTokenProcessor> processor_;
  grpc_server_credentials* creds_;
};

}  // namespace loco
