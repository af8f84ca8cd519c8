#include "rpc/incarnation_trailer.h"

#include <charconv>
#include <string>

namespace loco {

void SetIncarnationTrailer(grpc::ServerContext* ctx, uint64_t incarnation) {
  ctx->AddTrailingMetadata(kIncarnationTrailer, std::to_string(incarnation));
}

std::optional<uint64_t> IncarnationTrailer(const grpc::ClientContext& ctx) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  const auto it = trailers.find(kIncarnationTrailer);
  if (it == trailers.end() || it->second.empty()) return std::nullopt;
  const char* begin = it->second.data();
  const char* end = begin + it->second.size();
  uint64_t value = 0;
  const auto [stop, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

}  // namespace loco
