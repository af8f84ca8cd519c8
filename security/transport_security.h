// TransportSecurity: validated TransportSecurityOptions with their files
// read, turned into gRPC credentials.
//
//   server: TLS with --tls-cert/--tls-key (requiring and verifying a client
//   certificate against --tls-ca with --tls-client-auth), or plaintext with
//   --insecure; with --auth-token-file every call must carry the token
//   (BearerTokenProcessor), refusals counted in an AuthRejections; with
//   --worker-token-file/--server-token-file every call must carry one of the
//   two, and role_policy() tells handlers which role it granted.
//   client: TLS verifying the server against --tls-ca (system roots when
//   empty) and the server name (--tls-server-name, default the host
//   dialled), presenting --tls-cert/--tls-key when given; or plaintext with
//   --insecure; with --auth-token-file `authorization: Bearer <token>` on
//   every call (loco-server with role tokens: the server token, on its
//   calls to the coordinator).
//
// The files are read once, by Load: a later rotation of a mounted Secret
// takes effect on restart. Immutable after Load; thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/transport_security_options.h"
#include "security/auth_rejections.h"
#include "security/caller_role.h"

namespace loco {

class TransportSecurity {
 public:
  // Validates `options` for `role`, then reads the PEM files and the token
  // (each must be non-empty; PEM files must hold a PEM block; --tls-key
  // must be the private key of --tls-cert).
  static StatusOr<std::shared_ptr<const TransportSecurity>> Load(
      const TransportSecurityOptions& options, TransportRole role);

  // Logs the startup warnings of plaintext ("plaintext: for trusted networks
  // only", and that a token travels in plaintext). For binaries' main().
  void LogStartupWarnings(const std::string& process) const;

  // Credentials for a listening port. With a token, calls without it are
  // refused with UNAUTHENTICATED and counted in `rejections` (nullable).
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
      std::shared_ptr<AuthRejections> rejections) const;

  // A channel to `target` ("host:port") with these credentials, `args` plus
  // the server-name override, and the token attached to every call.
  std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                               grpc::ChannelArguments args) const;

  // For a call whose connection the peer closed while it was being set up
  // (kClosedAtConnect in rpc/transport_failure.h; `message` is gRPC's, which
  // names the address it tried): probes that address once (ProbePeerTls in
  // security/peer_tls_probe.h, within `timeout`) and says why no retry with
  // this process's transport can succeed, when that is certain: the peer
  // speaks TLS and this process connects in plaintext (--insecure); the
  // peer requires a client certificate and this process presents none; or
  // the peer answers this process's certificate, which the probe presents,
  // with a certificate alert (unknown CA, expired, ...). nullopt otherwise
  // (a restarting peer, or one that ends the connection without such an
  // alert): the caller retries as before. Blocks for up to
  // kRefusalProbeTimeout; a retry loop asks at most once per
  // kRefusalProbeEvery.
  std::optional<std::string> RefusalOfThisTransport(std::string_view message) const;
  static constexpr std::chrono::milliseconds kRefusalProbeTimeout{2000};
  static constexpr std::chrono::seconds kRefusalProbeEvery{10};

  const TransportSecurityOptions& options() const { return options_; }
  bool insecure() const { return options_.insecure; }
  bool has_token() const { return !token_.empty() || !worker_token_.empty(); }
  // What decides a call's role (security/caller_role.h); never null.
  const RolePolicy& role_policy() const { return *role_policy_; }
  std::shared_ptr<const RolePolicy> shared_role_policy() const { return role_policy_; }
  // A one-line description for startup logs ("TLS, client certificates
  // required, bearer token").
  std::string Describe() const;

 private:
  TransportSecurity() = default;

  TransportSecurityOptions options_;
  TransportRole role_ = TransportRole::kClient;
  // The tokens a listening port accepts (one, or the two role tokens).
  std::vector<std::string> AcceptedTokens() const;
  // The token this process attaches to its own calls (empty: none).
  const std::string& PresentedToken() const;

  std::string cert_pem_, key_pem_, ca_pem_, token_;
  std::string worker_token_, server_token_;  // role tokens (both or neither)
  std::shared_ptr<const RolePolicy> role_policy_;
};

}  // namespace loco
