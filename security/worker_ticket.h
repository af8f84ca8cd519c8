// WorkerTicket: proof that a caller is the worker a Join admitted, so that a
// holder of the worker credential cannot keep another worker's id alive
// (Heartbeat) or make it leave (Leave).
//
// The ticket, returned by Join, is "<key id>.<mac>" in lower-case hex (81
// characters): the key id is the first 8 bytes of HMAC-SHA256(key,
// "loco-worker-ticket-key-id/v2"), the mac HMAC-SHA256(key,
// "loco-worker-ticket/v2:" + worker id). Checking it needs only the key: the
// coordinator and the shards store nothing per ticket. Worker ids are never
// reused, so a ticket names one admission. The key id lets a shard tell a
// ticket of a key it has not learned yet (the coordinator restarted with a
// new one) from a forged one; it says nothing about the key's bytes.
//
// The key comes from a file (--ticket-key-file, a mounted Secret of at least
// 32 bytes), so that tickets survive a coordinator restart; without one a
// random key is drawn per process, and a restarted coordinator refuses every
// earlier ticket (its workers must join again).
//
// Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace loco {

class WorkerTicketKey {
 public:
  static constexpr size_t kMinKeyBytes = 32;
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kKeyIdChars = 16;
  static constexpr size_t kTicketChars = kKeyIdChars + 1 + 64;

  // Reads the key in `path`: 32..4096 bytes once trailing line breaks (\n,
  // \r) are dropped, so a raw binary key must not end in one.
  // Errors name --ticket-key-file and say what is expected.
  static StatusOr<WorkerTicketKey> FromFile(const std::string& path);
  // A key of 32 random bytes from the system's CSPRNG.
  static StatusOr<WorkerTicketKey> Random();
  // A key from bytes (tests); `key` must hold at least kMinKeyBytes.
  static StatusOr<WorkerTicketKey> FromBytes(std::string key);

  // The ticket of `worker_id`.
  std::string Issue(uint64_t worker_id) const;
  // True when `ticket` is the ticket of `worker_id`; constant-time in its
  // content.
  bool Verify(uint64_t worker_id, std::string_view ticket) const;

  // This key's id (kKeyIdChars hex characters), the prefix of its tickets.
  const std::string& id() const { return id_; }
  // The key id a ticket names; empty when `ticket` is not shaped like one.
  static std::string_view KeyIdOf(std::string_view ticket);
  // The key's bytes: what the coordinator hands to the servers it
  // registers (RegisterServerResponse.ticket_key) so that they check
  // tickets too. A Secret: never logged.
  const std::string& secret() const { return key_; }

 private:
  explicit WorkerTicketKey(std::string key);

  std::string key_;
  std::string id_;
};

}  // namespace loco
