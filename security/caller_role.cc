#include "security/caller_role.h"

#include <charconv>

#include "security/bearer_token.h"

namespace loco {
namespace {

constexpr std::string_view kWorkerName = "loco-worker";
constexpr std::string_view kServerName = "loco-server";
constexpr std::string_view kShardPrefix = "loco-server.shard-";

// Applies one certificate name to `out` (names that mean nothing are ignored:
// a server's certificate also carries the host names it serves under).
void ApplyCertificateName(const std::string& name, CallerIdentity* out, bool* any_shard,
                          std::vector<uint32_t>* shards) {
  if (name == kWorkerName ||
      (name.size() > kWorkerName.size() + 1 && name.starts_with(kWorkerName) &&
       name[kWorkerName.size()] == '.')) {
    out->worker = true;
    return;
  }
  if (name == kServerName) {
    out->server = true;
    *any_shard = true;
    return;
  }
  if (name.starts_with(kShardPrefix)) {
    const std::string_view digits = std::string_view(name).substr(kShardPrefix.size());
    uint32_t shard = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), shard);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty()) {
      out->server = true;
      shards->push_back(shard);
    }
  }
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& n : names) {
    if (!joined.empty()) joined += ",";
    joined += n;
  }
  return joined;
}

}  // namespace

const char* CallerRoleName(CallerRole role) {
  return role == CallerRole::kWorker ? "worker" : "server";
}

StatusOr<RolePolicy> RolePolicy::Make(Config config) {
  const bool worker = !config.worker_token.empty(), server = !config.server_token.empty();
  if (!config.shared_token.empty() && (worker || server)) {
    return InvalidArgument(
        "--auth-token-file cannot be combined with --worker-token-file/--server-token-file: "
        "the shared token would grant both roles; give only the two role tokens");
  }
  if (worker != server) {
    return InvalidArgument(std::string(worker ? "--worker-token-file" : "--server-token-file") +
                           " was given without " +
                           (worker ? "--server-token-file" : "--worker-token-file") +
                           ": role-separated tokens need both (or neither, with "
                           "--auth-token-file for one shared token)");
  }
  if (worker && ConstantTimeEquals(config.worker_token, config.server_token)) {
    return InvalidArgument("--worker-token-file and --server-token-file hold the same token: "
                           "the roles would not be separated; make two different tokens");
  }
  return RolePolicy(std::move(config));
}

CallerIdentity RolePolicy::Resolve(std::optional<std::string_view> bearer_token,
                                   const std::vector<std::string>& certificate_names) const {
  CallerIdentity token_roles;
  if (role_tokens()) {
    // Both comparisons always run: the time says nothing about which matched.
    const std::string_view presented = bearer_token.value_or(std::string_view());
    const bool worker = bearer_token && ConstantTimeEquals(presented, config_.worker_token);
    const bool server = bearer_token && ConstantTimeEquals(presented, config_.server_token);
    token_roles.worker = worker;
    token_roles.server = server;
    if (server) token_roles.server_identity = "server-token";
  } else {
    // A shared token (checked by the transport) or none: both roles.
    token_roles.worker = token_roles.server = true;
  }
  if (!config_.certificate_roles) return token_roles;

  CallerIdentity cert_roles;
  bool any_shard = false;
  std::vector<uint32_t> shards;
  for (const std::string& name : certificate_names) {
    ApplyCertificateName(name, &cert_roles, &any_shard, &shards);
  }
  // One shard named alone restricts; "loco-server" or several shards do not
  // narrow to one (several named shards: the first only, to stay strict).
  if (!any_shard && !shards.empty()) cert_roles.server_shard = shards.front();
  CallerIdentity both;
  both.worker = token_roles.worker && cert_roles.worker;
  both.server = token_roles.server && cert_roles.server;
  both.server_shard = cert_roles.server_shard;
  if (both.server) both.server_identity = "certificate:" + JoinNames(certificate_names);
  return both;
}

Status AuthorizeRole(const CallerIdentity& caller, CallerRole required, const char* rpc) {
  if (caller.Has(required)) return Status::Ok();
  const bool worker = required == CallerRole::kWorker;
  return PermissionDenied(
      std::string(rpc) + " is for the " + CallerRoleName(required) +
      " role; this caller's credentials do not grant it (a " + CallerRoleName(required) +
      " presents the " + (worker ? "worker token (--auth-token-file on the worker)"
                                 : "server token (--server-token-file on loco-server)") +
      ", or with --tls-client-roles a certificate named " +
      (worker ? "loco-worker[.<name>]" : "loco-server[.shard-<k>]") + ")");
}

Status AuthorizeShardCall(const CallerIdentity& caller, uint32_t shard_id, const char* rpc) {
  LOCO_RETURN_IF_ERROR(AuthorizeRole(caller, CallerRole::kServer, rpc));
  if (caller.server_shard && *caller.server_shard != shard_id) {
    return PermissionDenied(std::string(rpc) + " for shard " + std::to_string(shard_id) +
                            " refused: this caller's certificate names shard " +
                            std::to_string(*caller.server_shard) + " only (loco-server.shard-" +
                            std::to_string(*caller.server_shard) + ")");
  }
  return Status::Ok();
}

}  // namespace loco
