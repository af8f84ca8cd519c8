// BearerTokenProcessor: the server side of the bearer token. gRPC runs it on
// every call's metadata before the call reaches a handler; a call without
// `authorization: Bearer <token>` equal to the expected token is refused
// with UNAUTHENTICATED and never touches a service's state.
//
// The comparison is constant-time in the token's content. With one accepted
// token the authorization header is consumed: handlers never see the secret.
// With several (the role tokens), it is left for the handlers' role check
// (security/call_identity.h), which alone reads it.
//
// Thread-safe; non-blocking (gRPC calls Process inline on its own threads).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>

#include "security/auth_rejections.h"

namespace loco {

class BearerTokenProcessor : public grpc::AuthMetadataProcessor {
 public:
  // `rejections` may be null (nothing counted or logged).
  BearerTokenProcessor(std::string token, std::shared_ptr<AuthRejections> rejections);
  // Accepts any of `tokens` (at least one).
  BearerTokenProcessor(std::vector<std::string> tokens,
                       std::shared_ptr<AuthRejections> rejections);

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const std::vector<std::string> tokens_;
  const std::shared_ptr<AuthRejections> rejections_;
};

}  // namespace loco
