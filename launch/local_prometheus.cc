#include "launch/local_prometheus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace loco {
namespace {

// Whether a GET of /-/ready on 127.0.0.1:port answers 200 from Prometheus
// ("Prometheus Server is Ready." in its body), within about a second.
bool AnswersReady(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    static constexpr char kRequest[] = "GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, kRequest, sizeof(kRequest) - 1, MSG_NOSIGNAL) ==
        static_cast<ssize_t>(sizeof(kRequest) - 1)) {
      char buf[512];
      for (int reads = 0; reads < 16 && reply.size() < 4096; ++reads) {
        const ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
        if (got <= 0) break;
        reply.append(buf, static_cast<size_t>(got));
      }
    }
  }
  ::close(fd);
  return reply.rfind("HTTP/1.", 0) == 0 && reply.find(" 200 ") != std::string::npos &&
         reply.find("Prometheus") != std::string::npos;
}

}  // namespace

LocalPrometheus::LocalPrometheus(std::string binary, std::string dir)
    : binary_(std::move(binary)), dir_(std::move(dir)) {}

StatusOr<int> LocalPrometheus::PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    int e = errno;
    ::close(fd);
    return Internal(std::string("cannot pick a free port: ") + std::strerror(e));
  }
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

StatusOr<std::string> LocalPrometheus::FindBinary(const std::string& hint) {
  if (hint.find('/') != std::string::npos) {
    if (::access(hint.c_str(), X_OK) == 0) return hint;
    return NotFound("cannot execute " + hint);
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    std::string candidate = d + "/" + hint;
    if (!d.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFound("'" + hint + "' is not on PATH: install Debian's prometheus package "
                  "(scripts/install-deps.sh does) or pass its path");
}

Status LocalPrometheus::AddTarget(const std::string& role, const std::string& name, int port) {
  auto same = std::find_if(targets_.begin(), targets_.end(),
                           [&](const Target& t) { return t.name == name; });
  if (same == targets_.end()) {
    targets_.push_back({role, name, port});
  } else {
    *same = {role, name, port};
  }
  return process_ ? WriteTargets() : Status::Ok();
}

Status LocalPrometheus::WriteTargets() const {
  // Write then rename, so Prometheus never reads half a file.
  const std::string path = dir_ + "/targets.json", tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "[\n";
    for (size_t i = 0; i < targets_.size(); ++i) {
      const Target& t = targets_[i];
      out << "  {\"targets\": [\"127.0.0.1:" << t.port << "\"], \"labels\": {\"role\": \""
          << t.role << "\", \"process\": \"" << t.name << "\"}}"
          << (i + 1 < targets_.size() ? "," : "") << "\n";
    }
    out << "]\n";
    if (!out) return Internal("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Internal("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status LocalPrometheus::WriteConfig() const {
  std::ofstream cfg(dir_ + "/prometheus.yml");
  cfg << "# Written by loco-launch for this run only.\n"
         "global:\n  scrape_interval: 2s\n  evaluation_interval: 2s\n"
         "scrape_configs:\n  - job_name: loco-local\n    file_sd_configs:\n"
         "      - files: ['"
      << dir_ << "/targets.json']\n        refresh_interval: 2s\n";
  if (!cfg) return Internal("cannot write " + dir_ + "/prometheus.yml");
  return Status::Ok();
}

Status LocalPrometheus::Start(int timeout_s, int port) {
  ::mkdir(dir_.c_str(), 0755);
  LOCO_RETURN_IF_ERROR(WriteTargets());
  LOCO_RETURN_IF_ERROR(WriteConfig());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  Status last = Status::Ok();
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    if (attempt > 0 || port == 0) {
      auto picked = PickFreePort();
      if (!picked.ok()) return picked.status();
      port = *picked;
    }
    port_ = port;
    last = StartOnce(deadline);
    if (last.code() != StatusCode::kFailedPrecondition) return last;
  }
  return Unavailable("prometheus could not listen on any of " + std::to_string(kStartAttempts) +
                     " free ports in turn (another process took each first): " + last.message());
}

Status LocalPrometheus::StartOnce(std::chrono::steady_clock::time_point deadline) {
  process_ = std::make_unique<ChildProcess>(
      "prometheus",
      std::vector<std::string>{binary_, "--config.file=" + dir_ + "/prometheus.yml",
                               "--storage.tsdb.path=" + dir_ + "/data",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
      dir_ + "/prometheus.log");
  LOCO_RETURN_IF_ERROR(process_->Start());
  while (std::chrono::steady_clock::now() < deadline) {
    if (process_->Poll()) {
      const std::string log = process_->LogTail(8);
      if (log.find("address already in use") != std::string::npos) {
        return FailedPrecondition("port " + std::to_string(port_) + " was in use");
      }
      return Unavailable("prometheus exited at startup with " + process_->DescribeExit() +
                         "; its log:\n" + log);
    }
    if (AnswersReady(port_)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return DeadlineExceeded("prometheus did not answer " + url() + "/-/ready in time");
}

void LocalPrometheus::Stop() {
  if (process_) process_->Stop(5000);
}

}  // namespace loco
