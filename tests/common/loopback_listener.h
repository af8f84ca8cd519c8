// LoopbackListener: a TCP socket listening on a free port of 127.0.0.1
// that never accepts. The kernel still completes the handshakes of those
// who connect (up to the backlog), so to a client the port looks served:
// the tests use it as "another process has this port" and as "a peer that
// never answers".
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace loco {

class LoopbackListener {
 public:
  // With `reuse_port`, SO_REUSEPORT is set before binding, as a gRPC
  // server of the same user sets it: a listener that would let another
  // SO_REUSEPORT socket share the port unless that one refuses to.
  explicit LoopbackListener(bool reuse_port = false) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    const int one = 1;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if ((reuse_port && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      Close();
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~LoopbackListener() { Close(); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  // The port it listens on; 0 when the socket could not be set up (the
  // test asserts on it).
  int port() const { return port_; }
  // Lets the port go (idempotent).
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace loco
