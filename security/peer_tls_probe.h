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
// The probe verifies nothing and presents no certificate: it asks only what
// the peer demands, and sends no application data. It offers ALPN "h2", as
// gRPC does. Thread-safe (each call has its own socket and TLS state).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace loco {

enum class PeerTls {
  kUnknown,             // no connection, or no answer in time
  kNoTls,               // connected, but no TLS record came back
  kTls,                 // a TLS handshake completed without a client certificate
  kRequiresClientCert,  // TLS, but the peer asked for a client certificate
                        // and ended the connection without one
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
// a quarter of `timeout` (at most 500 ms) for the peer's verdict on the
// missing one: an alert or a close means it requires one.
PeerTls ProbePeerTls(const PeerAddress& peer, std::chrono::milliseconds timeout);

}  // namespace loco
