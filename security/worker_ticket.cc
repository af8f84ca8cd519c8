#include "security/worker_ticket.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>

#include "security/bearer_token.h"

namespace loco {
namespace {

// HMAC-SHA256(key, message) in lower-case hex.
std::string HexHmac(const std::string& key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * mac_len);
  for (unsigned int i = 0; i < mac_len; ++i) {
    hex.push_back(kHex[mac[i] >> 4]);
    hex.push_back(kHex[mac[i] & 15]);
  }
  return hex;
}

}  // namespace

WorkerTicketKey::WorkerTicketKey(std::string key)
    : key_(std::move(key)),
      id_(HexHmac(key_, "loco-worker-ticket-key-id/v2").substr(0, kKeyIdChars)) {}

StatusOr<WorkerTicketKey> WorkerTicketKey::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument("--ticket-key-file '" + path + "' cannot be opened for reading");
  }
  std::string key;
  char c;
  while (key.size() <= kMaxKeyBytes + 2 && in.get(c)) key.push_back(c);
  const size_t read = key.size();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    const std::string dropped = read == key.size()
                                    ? ""
                                    : " after dropping " + std::to_string(read - key.size()) +
                                          " trailing line-break byte(s)";
    return InvalidArgument("--ticket-key-file '" + path + "' holds " + std::to_string(key.size()) +
                           " bytes" + dropped + "; expected " + std::to_string(kMinKeyBytes) +
                           ".." + std::to_string(kMaxKeyBytes) +
                           " (e.g. `openssl rand -hex 32 > FILE`)");
  }
  return WorkerTicketKey(std::move(key));
}

StatusOr<WorkerTicketKey> WorkerTicketKey::Random() {
  std::string key(kMinKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) !=
      1) {
    return Internal("cannot draw a random worker-ticket key (OpenSSL RAND_bytes failed)");
  }
  return WorkerTicketKey(std::move(key));
}

StatusOr<WorkerTicketKey> WorkerTicketKey::FromBytes(std::string key) {
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    return InvalidArgument("a worker-ticket key holds " + std::to_string(kMinKeyBytes) + ".." +
                           std::to_string(kMaxKeyBytes) + " bytes, not " +
                           std::to_string(key.size()));
  }
  return WorkerTicketKey(std::move(key));
}

std::string WorkerTicketKey::Issue(uint64_t worker_id) const {
  return id_ + "." + HexHmac(key_, "loco-worker-ticket/v2:" + std::to_string(worker_id));
}

std::string_view WorkerTicketKey::KeyIdOf(std::string_view ticket) {
  if (ticket.size() != kTicketChars || ticket[kKeyIdChars] != '.') return {};
  return ticket.substr(0, kKeyIdChars);
}

bool WorkerTicketKey::Verify(uint64_t worker_id, std::string_view ticket) const {
  return ConstantTimeEquals(Issue(worker_id), ticket);
}

}  // namespace loco
