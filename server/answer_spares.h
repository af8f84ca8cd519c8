// AnswerSpares: the buffers of a shard's last pull answer (the delta's
// codes and scales, or the bf16 copy), given back by their last holder and
// reused for the next version's answer.
//
// Why: as with the pushes (server/payload_buffers.h), a buffer made new for
// every version is zero-filled and, above 32 MiB, fresh pages from the
// kernel with a page fault per 4 KiB, inside the step's apply (the answer
// is encoded as the step computes). A delta's codes at 8 bits are one byte
// per shard element: 37 MB per version for a 36.8M-element shard.
//
// One spare per kind. An answer's buffers normally come back before the
// next version is encoded (its pulls have sent them by the time the next
// step's pushes arrive); a buffer still held then is not waited for, and
// the next answer gets a new one.
//
// Thread-safe: the last holder of an answer may be any gRPC thread. Owned
// through a shared_ptr (Create): the buffers' deleters hold a weak_ptr, so
// a buffer that outlives the spares is simply freed.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

namespace loco {

class AnswerSpares : public std::enable_shared_from_this<AnswerSpares> {
 public:
  enum class Kind { kCodes = 0, kScales = 1, kBf16 = 2 };

  static std::shared_ptr<AnswerSpares> Create() {
    return std::shared_ptr<AnswerSpares>(new AnswerSpares());
  }

  // A buffer of exactly `bytes` bytes whose contents are unspecified (the
  // spare's old bytes, or zeros): the caller writes every byte before any
  // is read. It is the spare of `kind` when there is one (resized; no byte
  // written when its size is already `bytes`), and returns to that slot
  // when its last shared_ptr goes, unless the slot is full by then.
  std::shared_ptr<std::string> Make(Kind kind, size_t bytes);

  // Σ capacity() of the spares: the memory they hold between answers.
  size_t spare_bytes() const;

 private:
  static constexpr size_t kKinds = 3;
  AnswerSpares() = default;
  void GiveBack(Kind kind, std::string buffer);

  mutable std::mutex mu_;
  std::string spares_[kKinds];
};

}  // namespace loco
