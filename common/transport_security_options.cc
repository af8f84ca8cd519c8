#include "common/transport_security_options.h"

#include <unistd.h>

#include <sys/stat.h>

namespace loco {
namespace {

bool Serves(TransportRole r) { return r != TransportRole::kClient; }
bool Connects(TransportRole r) { return r != TransportRole::kServer; }

// OK when `path` names a regular file this process can read.
Status CheckReadableFile(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return InvalidArgument("--" + flag + " names '" + path +
                           "', which does not exist; expected a readable file");
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("--" + flag + " names '" + path +
                           "', which is not a regular file; expected a readable file");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return InvalidArgument("--" + flag + " names '" + path +
                           "', which this process may not read; fix its permissions");
  }
  return Status::Ok();
}

}  // namespace

void AddTransportSecurityFlags(FlagSet& flags, TransportRole role, TransportSecurityOptions* out) {
  flags.AddBool("insecure", "LOCO_INSECURE", false,
                "plaintext gRPC without TLS, for trusted networks only (without it, TLS "
                "material is required)",
                &out->insecure);
  flags.AddString("tls-cert", "LOCO_TLS_CERT", "",
                  Serves(role) ? "PEM certificate chain this process serves TLS with (and "
                                 "presents as a client for mutual TLS)"
                               : "PEM certificate chain presented to servers for mutual TLS",
                  &out->tls_cert);
  flags.AddString("tls-key", "LOCO_TLS_KEY", "", "PEM private key of --tls-cert", &out->tls_key);
  flags.AddString("tls-ca", "LOCO_TLS_CA", "",
                  Serves(role) ? "PEM CA bundle that verifies peers (servers with "
                                 "--tls-client-auth verify clients; clients verify servers)"
                               : "PEM CA bundle that verifies the servers (empty = system roots)",
                  &out->tls_ca);
  if (Serves(role)) {
    flags.AddBool("tls-client-auth", "LOCO_TLS_CLIENT_AUTH", false,
                  "require a client certificate signed by --tls-ca (mutual TLS)",
                  &out->tls_client_auth);
    flags.AddBool("tls-client-roles", "LOCO_TLS_CLIENT_ROLES", false,
                  "the caller's role also from its client certificate's CN/SAN: loco-worker[.x] "
                  "is a worker, loco-server[.shard-<k>] a server (of shard k); needs "
                  "--tls-client-auth",
                  &out->tls_client_roles);
  }
  if (Connects(role)) {
    flags.AddString("tls-server-name", "LOCO_TLS_SERVER_NAME", "",
                    "name the server certificates must carry (empty = the host part of the "
                    "address dialled)",
                    &out->tls_server_name);
  }
  flags.AddString("auth-token-file", "LOCO_AUTH_TOKEN_FILE", "",
                  Serves(role) ? "file holding the bearer token every call must carry "
                                 "(trailing newline trimmed; needs TLS unless --insecure)"
                               : "file holding the bearer token sent on every call (trailing "
                                 "newline trimmed; needs TLS unless --insecure)",
                  &out->auth_token_file);
  if (Serves(role)) {
    flags.AddString("worker-token-file", "LOCO_WORKER_TOKEN_FILE", "",
                    "file holding the token workers present (the worker role: Join, Leave, "
                    "Heartbeat, Push, Pull, InitShard); with --server-token-file, instead of "
                    "--auth-token-file",
                    &out->worker_token_file);
    flags.AddString("server-token-file", "LOCO_SERVER_TOKEN_FILE", "",
                    role == TransportRole::kServer
                        ? "file holding the token parameter servers present (the server role: "
                          "RegisterServer, GetStepParticipants); with --worker-token-file"
                        : "file holding the token this server presents to the coordinator (the "
                          "server role); with --worker-token-file",
                    &out->server_token_file);
  }
}

Status ValidateTransportSecurityOptions(const TransportSecurityOptions& o, TransportRole role) {
  if (o.insecure && o.has_tls_material()) {
    return InvalidArgument(
        "--insecure contradicts the TLS settings given (--tls-cert/--tls-key/--tls-ca/"
        "--tls-client-auth/--tls-server-name): drop --insecure to use TLS, or drop the TLS "
        "settings for plaintext");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return InvalidArgument(std::string(o.tls_cert.empty() ? "--tls-key" : "--tls-cert") +
                           " was given without " +
                           (o.tls_cert.empty() ? "--tls-cert" : "--tls-key") +
                           ": pass both (the certificate chain and its private key) or neither");
  }
  if (o.tls_client_auth && !Serves(role)) {
    return InvalidArgument("--tls-client-auth is a server setting; a client presents "
                           "--tls-cert/--tls-key instead");
  }
  if (!o.tls_server_name.empty() && !Connects(role)) {
    return InvalidArgument("--tls-server-name is a client setting; this process only serves");
  }
  if (o.has_role_tokens() && !Serves(role)) {
    return InvalidArgument("--worker-token-file/--server-token-file are server settings; a "
                           "worker presents its token with --auth-token-file");
  }
  if (o.has_role_tokens() && !o.auth_token_file.empty()) {
    return InvalidArgument(
        "--auth-token-file cannot be combined with --worker-token-file/--server-token-file: the "
        "shared token would grant both roles; give only the two role tokens");
  }
  if (o.worker_token_file.empty() != o.server_token_file.empty()) {
    return InvalidArgument(std::string(o.worker_token_file.empty() ? "--server-token-file"
                                                                   : "--worker-token-file") +
                           " was given without " +
                           (o.worker_token_file.empty() ? "--worker-token-file"
                                                        : "--server-token-file") +
                           ": role-separated tokens need both (or neither, with "
                           "--auth-token-file for one shared token)");
  }
  if (o.tls_client_roles && !o.tls_client_auth) {
    return InvalidArgument("--tls-client-roles needs --tls-client-auth: roles come from a "
                           "verified client certificate");
  }
  if (o.tls_client_auth && o.tls_ca.empty()) {
    return InvalidArgument("--tls-client-auth needs --tls-ca: the CA bundle that signed the "
                           "client certificates");
  }
  if (!o.insecure) {
    if (Serves(role) && o.tls_cert.empty()) {
      return InvalidArgument(
          "no transport security configured: pass --tls-cert and --tls-key (and --tls-ca to "
          "verify peers) to serve TLS, or --insecure for plaintext on a trusted network");
    }
    if (!Serves(role) && !o.has_tls_material()) {
      return InvalidArgument(
          "no transport security configured: pass --tls-ca (the CA that signed the servers' "
          "certificates; and --tls-cert/--tls-key for mutual TLS) to connect with TLS, or "
          "--insecure for plaintext on a trusted network");
    }
  }
  if (!o.tls_cert.empty()) LOCO_RETURN_IF_ERROR(CheckReadableFile("tls-cert", o.tls_cert));
  if (!o.tls_key.empty()) LOCO_RETURN_IF_ERROR(CheckReadableFile("tls-key", o.tls_key));
  if (!o.tls_ca.empty()) LOCO_RETURN_IF_ERROR(CheckReadableFile("tls-ca", o.tls_ca));
  if (!o.auth_token_file.empty()) {
    LOCO_RETURN_IF_ERROR(CheckReadableFile("auth-token-file", o.auth_token_file));
  }
  if (!o.worker_token_file.empty()) {
    LOCO_RETURN_IF_ERROR(CheckReadableFile("worker-token-file", o.worker_token_file));
    LOCO_RETURN_IF_ERROR(CheckReadableFile("server-token-file", o.server_token_file));
  }
  return Status::Ok();
}

std::vector<std::string> TransportSecurityArgs(const TransportSecurityOptions& o,
                                               TransportRole role) {
  std::vector<std::string> args;
  if (o.insecure) args.push_back("--insecure");
  if (!o.tls_cert.empty()) args.push_back("--tls-cert=" + o.tls_cert);
  if (!o.tls_key.empty()) args.push_back("--tls-key=" + o.tls_key);
  if (!o.tls_ca.empty()) args.push_back("--tls-ca=" + o.tls_ca);
  if (o.tls_client_auth && Serves(role)) args.push_back("--tls-client-auth");
  if (!o.tls_server_name.empty() && Connects(role)) {
    args.push_back("--tls-server-name=" + o.tls_server_name);
  }
  if (!o.auth_token_file.empty()) args.push_back("--auth-token-file=" + o.auth_token_file);
  // A worker presents the worker token as its one token.
  if (!Serves(role) && !o.worker_token_file.empty()) {
    args.push_back("--auth-token-file=" + o.worker_token_file);
  }
  if (Serves(role)) {
    if (o.tls_client_roles) args.push_back("--tls-client-roles");
    if (!o.worker_token_file.empty()) {
      args.push_back("--worker-token-file=" + o.worker_token_file);
    }
    if (!o.server_token_file.empty()) {
      args.push_back("--server-token-file=" + o.server_token_file);
    }
  }
  return args;
}

}  // namespace loco
