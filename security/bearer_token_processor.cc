#include "security/bearer_token_processor.h"

#include <optional>

#include "security/bearer_token.h"

namespace loco {
namespace {

std::string_view View(const grpc::string_ref& s) { return std::string_view(s.data(), s.size()); }

// How the server can name the caller: gRPC does not hand the peer's address
// to an AuthMetadataProcessor, so this is the identity its certificate
// proves (mutual TLS), else "anonymous", plus the client's user-agent.
std::string DescribeClient(const grpc::AuthContext* context,
                           const grpc::AuthMetadataProcessor::InputMetadata& md) {
  std::string who;
  if (context != nullptr) {
    for (const grpc::string_ref& id : context->GetPeerIdentity()) {
      if (!who.empty()) who += ",";
      who.append(id.data(), id.size());
    }
  }
  if (who.empty()) who = "anonymous";
  auto ua = md.find("user-agent");
  if (ua != md.end()) {
    // Bounded: a client chooses its user-agent.
    who += " (user-agent '" + std::string(View(ua->second).substr(0, 128)) + "')";
  }
  return who;
}

}  // namespace

BearerTokenProcessor::BearerTokenProcessor(std::string token,
                                           std::shared_ptr<AuthRejections> rejections)
    : tokens_{std::move(token)}, rejections_(std::move(rejections)) {}

BearerTokenProcessor::BearerTokenProcessor(std::vector<std::string> tokens,
                                           std::shared_ptr<AuthRejections> rejections)
    : tokens_(std::move(tokens)), rejections_(std::move(rejections)) {}

grpc::Status BearerTokenProcessor::Process(const InputMetadata& auth_metadata,
                                           grpc::AuthContext* context,
                                           OutputMetadata* consumed_auth_metadata,
                                           OutputMetadata* /*response_metadata*/) {
  auto refuse = [&](AuthRejectReason reason, const char* message) {
    if (rejections_) rejections_->OnRejected(reason, DescribeClient(context, auth_metadata));
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, message);
  };
  auto it = auth_metadata.find("authorization");
  if (it == auth_metadata.end()) {
    return refuse(AuthRejectReason::kMissingToken,
                  "missing 'authorization: Bearer <token>' metadata (give the client the "
                  "cluster's token: --auth-token-file or $LOCO_AUTH_TOKEN_FILE, "
                  "auth_token_file in Python)");
  }
  const std::string_view value = View(it->second);
  const std::optional<std::string_view> presented = TokenOfBearerHeader(value);
  if (!presented || auth_metadata.count("authorization") != 1) {
    return refuse(AuthRejectReason::kMalformedToken,
                  "the 'authorization' metadata is not one 'Bearer <token>' value");
  }
  // Every accepted token is compared: the time says nothing about which one
  // matched.
  bool matched = false;
  for (const std::string& token : tokens_) {
    matched = ConstantTimeEquals(*presented, token) || matched;
  }
  if (!matched) {
    return refuse(AuthRejectReason::kBadToken, "the bearer token is not the one this server "
                                               "expects");
  }
  if (tokens_.size() > 1) return grpc::Status::OK;  // the role check reads it
  consumed_auth_metadata->insert({std::string(it->first.data(), it->first.size()),
                                  std::string(value)});
  return grpc::Status::OK;
}

}  // namespace loco
