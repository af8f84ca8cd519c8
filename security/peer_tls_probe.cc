#include "security/peer_tls_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

namespace loco {
namespace {

using Clock = std::chrono::steady_clock;

// What the handshake's callbacks saw (the SSL object's app data).
struct Observed {
  bool certificate_requested = false;
  bool peer_sent_tls = false;  // any TLS record from the peer
  int peer_alert = -1;         // the description of the peer's last alert
};

// OpenSSL calls this when the peer sends a CertificateRequest; 0: this
// client has no certificate to give.
int NoClientCertificate(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  static_cast<Observed*>(SSL_get_app_data(ssl))->certificate_requested = true;
  return 0;
}

// A handshake message or an alert from the peer: it speaks TLS. (The
// record-header pseudo types are reported before a header is checked, so
// bytes that are not TLS at all would show up as one.)
// Also notes a CertificateRequest (the client_cert_cb is not called when
// the probe has a certificate to present) and the alert's description.
void NoteRecord(int write_p, int /*version*/, int content_type, const void* buf, size_t len,
                SSL* ssl, void* /*arg*/) {
  if (write_p != 0 || (content_type != SSL3_RT_HANDSHAKE && content_type != SSL3_RT_ALERT)) return;
  auto* observed = static_cast<Observed*>(SSL_get_app_data(ssl));
  observed->peer_sent_tls = true;
  const auto* bytes = static_cast<const unsigned char*>(buf);
  if (content_type == SSL3_RT_HANDSHAKE && len >= 1 && bytes[0] == SSL3_MT_CERTIFICATE_REQUEST) {
    observed->certificate_requested = true;
  }
  if (content_type == SSL3_RT_ALERT && len >= 2) observed->peer_alert = bytes[1];
}

// An alert by which a peer refuses the certificate it was given.
bool IsCertificateAlert(int description) {
  switch (description) {
    case SSL_AD_BAD_CERTIFICATE:
    case SSL_AD_UNSUPPORTED_CERTIFICATE:
    case SSL_AD_CERTIFICATE_REVOKED:
    case SSL_AD_CERTIFICATE_EXPIRED:
    case SSL_AD_CERTIFICATE_UNKNOWN:
    case SSL_AD_UNKNOWN_CA:
    case SSL_AD_ACCESS_DENIED:
    case SSL_AD_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};

// Makes `ctx` present `identity`: the leaf, the chain after it, the key.
bool UseIdentity(SSL_CTX* ctx, const ProbeIdentity& identity) {
  std::unique_ptr<BIO, BioFree> certs(
      BIO_new_mem_buf(identity.cert_pem.data(), static_cast<int>(identity.cert_pem.size())));
  std::unique_ptr<BIO, BioFree> key(
      BIO_new_mem_buf(identity.key_pem.data(), static_cast<int>(identity.key_pem.size())));
  if (!certs || !key) return false;
  X509* leaf = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr);
  if (leaf == nullptr) return false;
  const bool leaf_used = SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  if (!leaf_used) return false;
  while (X509* intermediate = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add_extra_chain_cert(ctx, intermediate) != 1) {  // owns it on success
      X509_free(intermediate);
      return false;
    }
  }
  ERR_clear_error();  // the end of the PEM list is an error in the queue
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(key.get(), nullptr, nullptr, nullptr);
  if (pkey == nullptr) return false;
  const bool key_used = SSL_CTX_use_PrivateKey(ctx, pkey) == 1;
  EVP_PKEY_free(pkey);
  return key_used && SSL_CTX_check_private_key(ctx) == 1;
}

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// OpenSSL writes to its socket with write(2), which raises SIGPIPE when
// the peer has already reset the connection: a peer that refuses the
// handshake may. SIGPIPE kills a process that does not ignore it (the
// binaries do not; Python does). So the probe's thread blocks it, and
// takes back a SIGPIPE its own writes left pending.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

// OpenSSL's error queue is per thread, and gRPC's TLS on this thread reads
// it too: the probe's failures must not be left there.
struct ErrorQueueCleared {
  ErrorQueueCleared() = default;
  ~ErrorQueueCleared() { ERR_clear_error(); }
  ErrorQueueCleared(const ErrorQueueCleared&) = delete;
  ErrorQueueCleared& operator=(const ErrorQueueCleared&) = delete;
};

int MillisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(left, 0));
}

void SetIoTimeout(int fd, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  if (ms <= 0) tv.tv_usec = 1000;  // 0 would mean "no timeout"
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// A blocking socket connected to `peer` (I/O bounded by SetIoTimeout), or
// -1 when it could not connect before `deadline`.
int Connect(const PeerAddress& peer, Clock::time_point deadline) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, peer.host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(peer.port));
    len = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, peer.host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(peer.port));
    len = sizeof(sockaddr_in6);
  } else {
    return -1;
  }
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int error = 0;
  socklen_t error_len = sizeof(error);
  if (::poll(&p, 1, MillisLeft(deadline)) != 1 ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_len) != 0 || error != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// Whether a failed SSL call ran out of time (the socket's SO_RCVTIMEO or
// SO_SNDTIMEO), rather than meeting an alert, a close or garbage: OpenSSL
// reports a timed-out read or write of a blocking socket as a retry.
bool TimedOut(int ssl_error, int saved_errno) {
  if (ssl_error == SSL_ERROR_WANT_READ || ssl_error == SSL_ERROR_WANT_WRITE) return true;
  return ssl_error == SSL_ERROR_SYSCALL && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
}

// After a completed handshake in which the peer asked for a certificate:
// does it end the connection (an alert, or a close) within `wait_ms`? A
// peer that only requests one waits for the client's first bytes instead.
bool EndsTheConnection(SSL* ssl, int fd, int wait_ms) {
  SetIoTimeout(fd, wait_ms);
  char byte = 0;
  const int read = SSL_read(ssl, &byte, 1);
  const int read_errno = errno;
  if (read > 0) return false;  // it spoke first: accepted
  return !TimedOut(SSL_get_error(ssl, read), read_errno);
}

}  // namespace

std::optional<PeerAddress> PeerAddressIn(std::string_view message) {
  for (std::string_view scheme : {std::string_view("ipv4:"), std::string_view("ipv6:[")}) {
    const size_t at = message.find(scheme);
    if (at == std::string_view::npos) continue;
    std::string_view rest = message.substr(at + scheme.size());
    PeerAddress peer;
    size_t port_at = 0;
    if (scheme == "ipv6:[") {
      const size_t close = rest.find("]:");
      if (close == std::string_view::npos) return std::nullopt;
      peer.host = std::string(rest.substr(0, close));
      port_at = close + 2;
    } else {
      const size_t colon = rest.find(':');
      if (colon == std::string_view::npos) return std::nullopt;
      peer.host = std::string(rest.substr(0, colon));
      port_at = colon + 1;
    }
    const char* first = rest.data() + port_at;
    const char* last = rest.data() + rest.size();
    const auto [end, error] = std::from_chars(first, last, peer.port);
    if (error != std::errc() || end == first || peer.port <= 0 || peer.port > 65535) {
      return std::nullopt;
    }
    return peer;
  }
  return std::nullopt;
}

PeerTls ProbePeerTls(const PeerAddress& peer, std::chrono::milliseconds timeout,
                     const ProbeIdentity* identity, std::string* peer_alert) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const SigpipeBlocked no_sigpipe;
  const ErrorQueueCleared leaves_no_errors;
  const Fd fd(Connect(peer, deadline));
  if (fd.get() < 0) return PeerTls::kUnknown;
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return PeerTls::kUnknown;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  if (identity != nullptr) {
    if (!UseIdentity(ctx.get(), *identity)) return PeerTls::kUnknown;
  } else {
    SSL_CTX_set_client_cert_cb(ctx.get(), NoClientCertificate);
  }
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx.get()));
  if (!ssl) return PeerTls::kUnknown;
  Observed observed;
  SSL_set_app_data(ssl.get(), &observed);
  SSL_set_msg_callback(ssl.get(), NoteRecord);
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_set_alpn_protos(ssl.get(), kAlpn, sizeof(kAlpn));
  if (SSL_set_fd(ssl.get(), fd.get()) != 1) return PeerTls::kUnknown;
  SetIoTimeout(fd.get(), MillisLeft(deadline));
  const int connected = SSL_connect(ssl.get());
  const int connect_errno = errno;
  const bool completed = connected == 1;
  const bool timed_out = !completed && TimedOut(SSL_get_error(ssl.get(), connected), connect_errno);
  if (!observed.peer_sent_tls) {
    if (completed) return PeerTls::kTls;
    return timed_out ? PeerTls::kUnknown : PeerTls::kNoTls;
  }
  if (!observed.certificate_requested) return PeerTls::kTls;
  // TLS 1.2 refuses in the handshake. In TLS 1.3 the client's side
  // completes first, and the peer judges the certificate after it.
  const int wait_ms = std::min<int>(500, static_cast<int>(timeout.count() / 4));
  const bool ended = !completed || EndsTheConnection(ssl.get(), fd.get(), std::max(wait_ms, 1));
  if (identity == nullptr) return ended ? PeerTls::kRequiresClientCert : PeerTls::kTls;
  if (!ended) return PeerTls::kTls;
  // gRPC closes without flushing the alert its TLS library wrote, so a
  // close counts as much as a certificate alert; any other alert does not.
  if (observed.peer_alert < 0) return PeerTls::kRefusesOurCertificate;
  if (!IsCertificateAlert(observed.peer_alert)) return PeerTls::kUnknown;
  if (peer_alert != nullptr) *peer_alert = SSL_alert_desc_string_long(observed.peer_alert);
  return PeerTls::kRefusesOurCertificate;
}

}  // namespace loco
