// TransportSecurityOptions: how a process protects its gRPC traffic — TLS
// material, mutual TLS, a bearer token, or explicit plaintext — as the same
// flags (flag + environment variable + default) on every binary.
//
// This half is free of gRPC so that loco-launch, which only starts other
// processes, can take and forward the same flags; security/transport_security.h
// turns validated options into gRPC credentials.
//
// Fail closed: the default options are neither TLS nor plaintext, and every
// server and client refuses to start with them. Plaintext must be asked for
// (`insecure`), TLS needs its files.
#pragma once

#include <string>
#include <vector>

#include "common/flags.h"
#include "common/status.h"

namespace loco {

// What a process does with its transport: serve (loco-coordinator), connect
// (loco-worker), or both (loco-server serves workers and calls the
// coordinator). It decides which flags exist and which checks apply.
enum class TransportRole { kServer, kClient, kServerAndClient };

struct TransportSecurityOptions {
  // Plaintext, for trusted networks only. Contradicts every TLS setting.
  bool insecure = false;
  // PEM certificate chain and private key of this process: servers serve TLS
  // with them; clients present them for mutual TLS. Both or neither.
  std::string tls_cert;
  std::string tls_key;
  // PEM CA bundle that verifies the peer (clients verify servers; servers
  // with tls_client_auth verify clients). Empty on a client: the system roots.
  std::string tls_ca;
  // Servers: require a client certificate signed by tls_ca.
  bool tls_client_auth = false;
  // Clients: the name the server certificate must carry (empty = the host
  // part of the address dialled).
  std::string tls_server_name;
  // A file holding the bearer token: servers require it on every call,
  // clients attach it to every call. Needs TLS unless `insecure`.
  std::string auth_token_file;
  // Role-separated tokens (docs/DESIGN.md §10). On the coordinator: the token
  // workers present and the token servers present, each granting its one
  // role. On loco-server: the token workers must present on its port, and
  // the token it presents to the coordinator. Both or neither; never with
  // auth_token_file (which grants both roles). Serving roles only.
  std::string worker_token_file;
  std::string server_token_file;
  // Servers: the caller's role (and a server's shard) also from its client
  // certificate's names (loco-worker[.x], loco-server[.shard-<k>]); needs
  // tls_client_auth.
  bool tls_client_roles = false;

  // Plaintext without a token: what in-process tests on loopback use.
  static TransportSecurityOptions Insecure() {
    TransportSecurityOptions o;
    o.insecure = true;
    return o;
  }
  bool has_tls_material() const {
    return !tls_cert.empty() || !tls_key.empty() || !tls_ca.empty() || tls_client_auth ||
           tls_client_roles || !tls_server_name.empty();
  }
  bool has_role_tokens() const { return !worker_token_file.empty() || !server_token_file.empty(); }
};

// Declares --insecure, --tls-cert, --tls-key, --tls-ca, --tls-client-auth
// and --tls-client-roles (roles that serve), --tls-server-name (roles that
// connect), --auth-token-file and --worker-token-file/--server-token-file
// (roles that serve) on `flags`, bound to `*out` (which must outlive Parse).
void AddTransportSecurityFlags(FlagSet& flags, TransportRole role, TransportSecurityOptions* out);

// Checks the combination and that every named file exists and is readable.
// Messages name the flags and say what would be right. Reads no file content
// beyond probing that it opens.
Status ValidateTransportSecurityOptions(const TransportSecurityOptions& o, TransportRole role);

// The flags that hand `o` on to a child process of `role` (for loco-launch):
// only the settings that role takes, each as --name=value.
std::vector<std::string> TransportSecurityArgs(const TransportSecurityOptions& o,
                                               TransportRole role);

}  // namespace loco
