// The coordinator's incarnation on every Heartbeat answer, errors
// included, as the trailing metadata entry `loco-incarnation` (decimal).
//
// Why: a successful answer carries its incarnation in the message, but a
// NOT_FOUND ("this worker is not a member") has no message. Without the
// trailer a worker could not tell a NOT_FOUND of the coordinator that
// admitted it from one of an older coordinator process still answering
// on the address (a replaced pod during a rolling update, a delayed
// reply), and would give up its membership and its error state for the
// latter. A coordinator that sends no trailer is taken at its word, as
// before.
#pragma once

#include <cstdint>
#include <optional>

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

namespace loco {

inline constexpr char kIncarnationTrailer[] = "loco-incarnation";

// Adds the trailer to the answer of `ctx` (call before the handler returns).
void SetIncarnationTrailer(grpc::ServerContext* ctx, uint64_t incarnation);

// The trailer of a finished call; nullopt when the server sent none, or
// sent something that is not a decimal number below 2^64.
[[nodiscard]] std::optional<uint64_t> IncarnationTrailer(const grpc::ClientContext& ctx);

}  // namespace loco
