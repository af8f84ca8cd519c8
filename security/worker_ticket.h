// WorkerTicket: proof that a caller is the worker a Join admitted, so that a
// holder of the worker credential cannot keep another worker's id alive
// (Heartbeat) or make it leave (Leave).
//
// The ticket is HMAC-SHA256(key, "loco-worker-ticket/v1:" + worker id) in
// lower-case hex (64 characters), returned by Join. Checking it needs only
// the key: the coordinator stores nothing per ticket. Worker ids are never
// reused, so a ticket names one admission.
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
  static constexpr size_t kTicketChars = 64;

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

 private:
  explicit WorkerTicketKey(std::string key) : key_(std::move(key)) {}

  std::string key_;
};

}  // namespace loco
