// TicketCheck: whether a shard call (InitShard, Push, Pull) comes from the
// worker whose id it names, by the ticket that worker's Join returned
// (security/worker_ticket.h). gRPC-free: ShardService asks it at the edge,
// before anything else of the call is read or touched.
//
// The shard learns the coordinator's ticket key when it registers
// (RegisterServerResponse.ticket_key, again at every keepalive); a
// coordinator that does not separate roles sends none. The rules:
//   * no ticket: refused (PERMISSION_DENIED) when `required` (this server
//     separates roles), else allowed;
//   * a ticket, no key learned: UNAVAILABLE when required (the worker
//     retries; the key comes with the first registration), else allowed,
//     since nothing can check it;
//   * a ticket of the key learned: allowed when it is the id's ticket, else
//     PERMISSION_DENIED;
//   * a ticket of a key this shard held before (a coordinator restarted
//     without a kept key): PERMISSION_DENIED, the worker must join again;
//   * a ticket of any other key: UNAVAILABLE, since it may be the key of a
//     coordinator that restarted since the last registration (or whose
//     answer to it was lost). The check then asks for the key
//     (TakeKeyWanted): the server registers again at once instead of at its
//     next keepalive, and the worker's retry passes. A forged ticket gets
//     the same answer: it is refused either way, and the server's early
//     registrations are spaced (ParameterServer).
//
// Thread-safe: Learn (the registration thread) and Check (handler threads)
// may run at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/status.h"
#include "security/worker_ticket.h"

namespace loco {

class TicketCheck {
 public:
  // How many earlier key ids are remembered, to refuse their tickets at once.
  static constexpr size_t kRetiredKeys = 8;

  explicit TicketCheck(bool required) : required_(required) {}

  // Takes the key a registration returned. An empty `key` changes nothing
  // (a coordinator that does not separate roles); a different key retires
  // the one held. INVALID_ARGUMENT, changing nothing, for a key of the
  // wrong size.
  [[nodiscard]] Status Learn(const std::string& key);

  // OK when `rpc` (for messages) may act as `worker_id` with `ticket`;
  // otherwise the refusal, per the rules above.
  [[nodiscard]] Status Check(uint64_t worker_id, std::string_view ticket, const char* rpc) const;

  bool required() const { return required_; }
  bool has_key() const;
  // True once after a Check met a ticket of a key this shard has not
  // learned (then cleared): the owner should register again now.
  bool TakeKeyWanted() { return key_wanted_.exchange(false); }

 private:
  const bool required_;
  mutable std::atomic<bool> key_wanted_{false};
  mutable std::mutex mu_;
  std::shared_ptr<const WorkerTicketKey> key_;  // guarded by mu_; null until learned
  std::deque<std::string> retired_ids_;         // guarded by mu_; newest last
};

}  // namespace loco
