#include "rpc/transport_failure.h"

#include <algorithm>
#include <cctype>

namespace loco {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

bool Has(const std::string& lower, std::string_view part) {
  return lower.find(part) != std::string::npos;
}

}  // namespace

TransportFailure ClassifyUnavailable(std::string_view message) {
  const std::string m = Lower(message);
  // OpenSSL words its reasons "certificate verify failed", BoringSSL
  // "CERTIFICATE_VERIFY_FAILED"; both name an expired certificate the same.
  if (Has(m, "certificate verify failed") || Has(m, "certificate_verify_failed")) {
    return TransportFailure::kUntrustedPeer;
  }
  if (Has(m, "peer name ") && Has(m, " is not in peer certificate")) {
    return TransportFailure::kPeerNameMismatch;
  }
  if (Has(m, "ssl handshake failed") &&
      (Has(m, "wrong version number") || Has(m, "wrong_version_number"))) {
    return TransportFailure::kPeerNotTls;
  }
  if (Has(m, "dns resolution failed")) return TransportFailure::kUnresolved;
  // The rest only while connecting: a call in flight whose peer went away
  // also reads "Socket closed".
  if (!Has(m, "failed to connect")) return TransportFailure::kOther;
  if (Has(m, "connection refused")) return TransportFailure::kRefused;
  if (Has(m, "socket closed") || Has(m, "connection reset")) {
    return TransportFailure::kClosedAtConnect;
  }
  return TransportFailure::kOther;
}

bool RetryCannotCure(TransportFailure failure) {
  return failure == TransportFailure::kUntrustedPeer ||
         failure == TransportFailure::kPeerNameMismatch || failure == TransportFailure::kPeerNotTls;
}

std::string TransportHint(TransportFailure failure) {
  switch (failure) {
    case TransportFailure::kOther:
      return "";
    case TransportFailure::kUnresolved:
      return "the host name does not resolve: is the address right, and does its DNS name "
             "(a Kubernetes Service's) exist yet?";
    case TransportFailure::kRefused:
      return "nothing accepts connections there: is the address right, and is its process up?";
    case TransportFailure::kClosedAtConnect:
      return "the peer closed the connection while it was being made: a TLS peer does so to a "
             "plaintext client (--insecure, insecure=True) and, under --tls-client-auth, to one "
             "without a certificate signed by its --tls-ca (--tls-cert and --tls-key, tls_cert "
             "and tls_key); or it is restarting";
    case TransportFailure::kUntrustedPeer:
      return "this process refused the peer's TLS certificate: it is not signed by a CA in "
             "--tls-ca (tls_ca), or it has expired; give the CA that signed the peer's "
             "--tls-cert";
    case TransportFailure::kPeerNameMismatch:
      return "the peer's TLS certificate does not name the host dialled: dial a name the "
             "certificate holds, or set --tls-server-name (tls_server_name) to one";
    case TransportFailure::kPeerNotTls:
      return "this process speaks TLS but the peer does not (it runs with --insecure): give "
             "both sides the same transport";
  }
  return "";
}

std::string TransportHintSuffix(TransportFailure failure) {
  const std::string hint = TransportHint(failure);
  return hint.empty() ? "" : " (" + hint + ")";
}

std::string TransportHintSuffix(std::string_view message) {
  return TransportHintSuffix(ClassifyUnavailable(message));
}

}  // namespace loco
