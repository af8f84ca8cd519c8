// GiveBackOnRelease: a buffer shared by the pulls that send it, handed back
// to the pool it came from when the last of them lets go. The one deleter
// of the server's reused answer buffers (ReturnPath's fp32 answer into
// PayloadBuffers, the delta and bf16 answers into AnswerSpares).
//
// Contract: `pool` is held weakly, so a buffer that outlives its pool (the
// shard was destroyed while a pull was sent) is simply freed. `give_back`
// is called as give_back(Pool&, std::string&&) by whichever thread drops
// the last reference (any gRPC thread): it must be thread-safe and must not
// throw. The string's bytes are moved out, not copied.
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace loco {

template <typename Pool, typename GiveBack>
std::shared_ptr<std::string> GiveBackOnRelease(std::string buffer, std::weak_ptr<Pool> pool,
                                               GiveBack give_back) {
  return std::shared_ptr<std::string>(
      new std::string(std::move(buffer)),
      [pool = std::move(pool), give_back = std::move(give_back)](std::string* sent) {
        if (std::shared_ptr<Pool> to = pool.lock()) give_back(*to, std::move(*sent));
        delete sent;
      });
}

}  // namespace loco
