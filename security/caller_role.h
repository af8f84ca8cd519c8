// CallerRole: which of the two kinds of caller a call comes from — a worker
// (Join, Leave, Heartbeat; Push, Pull, InitShard on a shard) or a parameter
// server (RegisterServer, GetStepParticipants) — and the RolePolicy that
// decides it from what the call proves: the bearer token it carries and, with
// mutual TLS, the names in its client certificate.
//
// Tokens: with --worker-token-file and --server-token-file each token grants
// its one role; the single shared --auth-token-file (and no token at all)
// grants both, i.e. roles are not separated (the behaviour before roles
// existed, kept for compatibility; binaries warn at start-up).
//
// Certificates (--tls-client-roles, needs --tls-client-auth): a name of the
// client certificate (its CN or a SAN gRPC reports) grants
//   "loco-worker" or "loco-worker.<anything>"  the worker role;
//   "loco-server"                               the server role, any shard;
//   "loco-server.shard-<k>"                     the server role, shard k only.
// With both tokens and certificate roles, a call has the roles both grant.
//
// A server's identity (who may later re-point its shard) is its certificate
// names with certificate roles, else "server-token" (every holder of the
// server token is the same identity), else empty (roles not separated:
// anybody, as before).
//
// gRPC-free so that it is unit-tested without a server
// (security/call_identity.h adapts a grpc::ServerContext). Immutable after
// Make; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace loco {

enum class CallerRole { kWorker, kServer };
// "worker", "server": for messages.
const char* CallerRoleName(CallerRole role);

// What one call proved.
struct CallerIdentity {
  bool worker = false;
  bool server = false;
  // With certificate roles, the one shard a "loco-server.shard-<k>"
  // certificate may register; nullopt = any shard.
  std::optional<uint32_t> server_shard;
  // Who the server is, for binding a shard to its first registrant (see the
  // file comment); empty = unbound.
  std::string server_identity;

  bool Has(CallerRole role) const { return role == CallerRole::kWorker ? worker : server; }
};

class RolePolicy {
 public:
  struct Config {
    std::string shared_token;  // --auth-token-file: both roles
    std::string worker_token;  // --worker-token-file
    std::string server_token;  // --server-token-file
    bool certificate_roles = false;  // --tls-client-roles
  };

  // Refuses a shared token together with role tokens (the shared one would
  // grant both roles and undo the separation), one role token without the
  // other, and equal worker and server tokens.
  static StatusOr<RolePolicy> Make(Config config);

  // True when some call can hold one role without the other.
  bool separated() const { return role_tokens() || config_.certificate_roles; }
  bool role_tokens() const { return !config_.worker_token.empty(); }
  bool certificate_roles() const { return config_.certificate_roles; }

  // The roles of a call that carried `bearer_token` (nullopt: no usable
  // authorization header) and whose verified client certificate carries
  // `certificate_names` (empty without mutual TLS). Token comparisons are
  // constant-time in the tokens' content.
  CallerIdentity Resolve(std::optional<std::string_view> bearer_token,
                         const std::vector<std::string>& certificate_names) const;

 private:
  explicit RolePolicy(Config config) : config_(std::move(config)) {}

  Config config_;
};

// OK when `caller` holds `required`; else PermissionDenied naming the RPC,
// the role it needs and what to give the caller.
[[nodiscard]] Status AuthorizeRole(const CallerIdentity& caller, CallerRole required,
                                   const char* rpc);

// OK when `caller` may act for shard `shard_id` in `rpc` (RegisterServer,
// GetStepParticipants): it holds the server role and, when its certificate
// names one shard, that shard.
[[nodiscard]] Status AuthorizeShardCall(const CallerIdentity& caller, uint32_t shard_id,
                                        const char* rpc);

}  // namespace loco
