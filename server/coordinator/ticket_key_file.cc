#include "server/coordinator/ticket_key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace loco {
namespace {

constexpr size_t kKeyBytes = 32;

Status ErrnoError(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

Status ReadRandom(unsigned char* out, size_t size) {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open /dev/urandom for the worker-ticket key");
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, out + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status s = ErrnoError("cannot read /dev/urandom for the worker-ticket key");
      ::close(fd);
      return s;
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

// Creates `path` (which must not exist) holding a new key, mode 0600.
Status CreateKeyFile(const std::string& path) {
  unsigned char key[kKeyBytes];
  LOCO_RETURN_IF_ERROR(ReadRandom(key, sizeof(key)));
  std::string hex;
  static constexpr char kDigits[] = "0123456789abcdef";
  for (unsigned char byte : key) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 15]);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("cannot create the worker-ticket key file " + path);
  Status result = Status::Ok();
  if (::fchmod(fd, 0600) != 0) {
    result = ErrnoError("cannot make " + path + " private (0600)");
  } else if (::write(fd, hex.data(), hex.size()) != static_cast<ssize_t>(hex.size())) {
    result = ErrnoError("cannot write the worker-ticket key file " + path);
  }
  if (::close(fd) != 0 && result.ok()) result = ErrnoError("cannot close " + path);
  return result;
}

}  // namespace

StatusOr<bool> WriteTicketKeyIfMissing(const std::string& path) {
  const std::string draft = path + ".new." + std::to_string(::getpid());
  ::unlink(draft.c_str());  // left by a start with this pid that was killed
  LOCO_RETURN_IF_ERROR(CreateKeyFile(draft));
  const bool linked = ::link(draft.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(draft.c_str());
  if (linked) return true;
  if (link_errno == EEXIST) return false;
  errno = link_errno;
  return ErrnoError("cannot create the worker-ticket key file " + path);
}

}  // namespace loco
