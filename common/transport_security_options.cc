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
  return args;
}

}  // namespace loco
