#include "tests/metrics/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loco::test {

StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                              std::chrono::milliseconds timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument("HttpGet needs an IPv4 literal, got '" + host + "'");
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Unavailable(std::string("socket: ") + std::strerror(errno));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return Unavailable("connect to " + host + ":" + std::to_string(port) + ": " + err);
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      close(fd);
      return Unavailable("send to " + host + ":" + std::to_string(port) + " failed");
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[8192];
  for (;;) {  // ends at EOF (HTTP/1.0 closes) or on the receive timeout
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      close(fd);
      return Unavailable("receive from " + host + ":" + std::to_string(port) + " timed out");
    }
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t eol = response.find("\r\n");
  const std::string status_line = response.substr(0, eol);
  if (status_line.find(" 200") == std::string::npos) {
    return Internal("GET " + path + ": " + status_line);
  }
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return Internal("GET " + path + ": no header end");
  return response.substr(body + 4);
}

}  // namespace loco::test
