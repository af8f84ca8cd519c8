// TransportFailure: why a call that gRPC answered UNAVAILABLE made no
// connection, as far as this process can tell, so that a retry loop stops
// at once where no retry can help and a message says which setting to
// check.
//
// gRPC 1.51 gives no structured cause: a connection that failed is
// UNAVAILABLE "failed to connect to all addresses; last error: ..." with
// the transport's reason in the text, so this reads the text. Only the
// verdicts of this process's own TLS handshake are decisive: the peer's
// certificate is not signed by a trusted CA, does not name the host
// dialled, or the peer does not speak TLS at all. Each stays so until
// someone changes a certificate or a flag. A peer that refuses this
// client (a plaintext client on its TLS port, no client certificate or one
// from another CA under --tls-client-auth) closes the socket during the
// handshake, which reads like a peer that restarts: that stays a retry,
// with a hint.
#pragma once

#include <string>
#include <string_view>

namespace loco {

enum class TransportFailure {
  kOther,             // not a connection failure this file knows (retry)
  kUnresolved,        // the host name does not resolve
  kRefused,           // nothing listens there
  kClosedAtConnect,   // the peer closed the socket while connecting
  kUntrustedPeer,     // the peer's certificate is not signed by --tls-ca
  kPeerNameMismatch,  // the peer's certificate does not name the host
  kPeerNotTls,        // this client speaks TLS, the peer plaintext
};

// The failure `message` (the error message of an UNAVAILABLE status)
// describes. Pure; thread-safe.
TransportFailure ClassifyUnavailable(std::string_view message);

// True for the failures no retry cures: kUntrustedPeer, kPeerNameMismatch,
// kPeerNotTls.
bool RetryCannotCure(TransportFailure failure);

// What to check, naming each setting both as the binaries' flag and as the
// worker option (Python keyword): "the peer's TLS certificate is not signed
// by a CA in --tls-ca (tls_ca): ...". Empty for kOther.
std::string TransportHint(TransportFailure failure);

// " (<hint>)" for `failure`, or for the failure `message` describes, or ""
// when none is known: appended to an UNAVAILABLE's message.
std::string TransportHintSuffix(TransportFailure failure);
std::string TransportHintSuffix(std::string_view message);

}  // namespace loco
