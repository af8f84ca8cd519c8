#include "security/call_identity.h"

#include <string_view>

#include "security/bearer_token.h"

namespace loco {
namespace {

// The token of the one well-formed authorization header; nullopt otherwise
// (none, several, or not "Bearer <token>").
std::optional<std::string_view> BearerToken(const grpc::ServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  if (md.count("authorization") != 1) return std::nullopt;
  const grpc::string_ref value = md.find("authorization")->second;
  return TokenOfBearerHeader(std::string_view(value.data(), value.size()));
}

std::vector<std::string> CertificateNames(const grpc::ServerContext& ctx) {
  std::vector<std::string> names;
  const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return names;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      names.emplace_back(value.data(), value.size());
    }
  }
  return names;
}

}  // namespace

CallerIdentity IdentifyCaller(const grpc::ServerContext& ctx, const RolePolicy* policy) {
  if (policy == nullptr || !policy->separated()) {
    CallerIdentity both;
    both.worker = both.server = true;
    return both;
  }
  return policy->Resolve(BearerToken(ctx),
                         policy->certificate_roles() ? CertificateNames(ctx)
                                                     : std::vector<std::string>());
}

}  // namespace loco
