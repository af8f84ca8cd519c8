// PeerTlsProbe: one TLS handshake of our own with a peer that closed a gRPC
// connection while it was being set up, to learn whether it speaks TLS and
// whether it requires a client certificate.
//
// gRPC 1.51 reports three different causes alike, as "Socket closed" while
// connecting: a plaintext client at a TLS port, a client without a
// certificate at a port under --tls-client-auth, and a peer that restarts.
// The first two do not change by retrying. A probe tells them apart:
// TransportSecurity::RefusalOfThisTransport (security/transport_security.h)
// compares its verdict with what this process presents.
//
// A process that presents a client certificate has a third cause alike: the
// peer refuses that certificate (signed by a CA not in its --tls-ca,
// expired). Given the process's own certificate, the probe presents it and
// reports the peer's alert.
//
// The probe verifies nothing, and presents no certificate but the one the
// process's own channels present to the same address anyway: it asks only
// what the peer demands, and sends no application data. It offers ALPN
// "h2", as gRPC does. Thread-safe (each call has its own socket and TLS
// state).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace loco {

enum class PeerTls {
  kUnknown,                // no connection, or no answer in time
  kNoTls,                  // connected, but no TLS record came back
  kTls,                    // a TLS handshake completed, and the peer kept the
                           // connection (a certificate presented was accepted)
  kRequiresClientCert,     // TLS, but the peer asked for a client certificate
                           // and ended the connection without one
  kRefusesOurCertificate,  // TLS, and the peer ended the connection after
                           // the certificate the probe presented
};

// The client certificate for the probe to present, in PEM: the leaf first,
// then any intermediates, and its private key. Both views must outlive the
// call.
struct ProbeIdentity {
  std::string_view cert_pem;
  std::string_view key_pem;
};

// A numeric address and port, as gRPC writes them in its errors.
struct PeerAddress {
  std::string host;  // "10.0.0.5" or "::1" (no brackets)
  int port = 0;
};

// The address gRPC names in an UNAVAILABLE message, which it writes as
// "ipv4:10.0.0.5:7000" or "ipv6:[::1]:7000"; nullopt when there is none.
std::optional<PeerAddress> PeerAddressIn(std::string_view message);

// Connects to `peer` and runs one TLS handshake, all within `timeout`.
// After a handshake in which the peer asked for a certificate, waits up to
// a quarter of `timeout` (at most 500 ms) for the peer's verdict:
// - without `identity` (null), on the missing certificate: an alert or a
//   close means it requires one;
// - with `identity`, on the certificate presented: a close, or an alert
//   that names the certificate (bad, unsupported, revoked, expired,
//   unknown, unknown CA, access denied, required), means
//   kRefusesOurCertificate, and the alert's description goes to
//   `peer_alert` (nullable; left alone after a close), e.g. "unknown CA".
//   gRPC 1.51's servers close without the alert. Any other alert is
//   kUnknown, as is an identity that does not load.
PeerTls ProbePeerTls(const PeerAddress& peer, std::chrono::milliseconds timeout,
                     const ProbeIdentity* identity = nullptr, std::string* peer_alert = nullptr);

}  // namespace loco
