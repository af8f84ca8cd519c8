// PayloadBuffers: the data buffers of one shard's pushes, kept from a
// closed step for the next step's pushes.
//
// Why: a push's data is one buffer of up to 4 bytes per shard element (a
// fp32 push of a 10M-element shard is 40 MB). Made new for every push, each
// costs the server a zero fill and a page fault per 4 KiB page: glibc serves
// every block above 32 MiB with fresh pages from the kernel and returns them
// when freed. At 20.0M parameters, fp32, W=4, S=2, that was the largest part
// of a server's CPU (bench/plan/README.md, "Fresh pages for every push").
// Every push of a step has the same size, so the closed step's buffers fit
// the next step's pushes exactly.
//
// The fp32 pull answer (ReturnPath) takes its buffer from the same spares
// and gives it back: between a step's close and the next step's pushes the
// server then holds one step's buffers, as it did while the pushes arrived,
// and not the answer besides.
//
// Bounded: Recycle replaces the spares with the buffers of the step that
// just closed, and Give adds none beyond their number, so the spares never
// outnumber the last closed step's payloads (a shard whose workers left
// does not keep their buffers); a spare too small for every later push is
// dropped at the next Recycle.
//
// Thread-safe: pushes to one shard are assembled on several gRPC threads.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace loco {

class PayloadBuffers {
 public:
  // A buffer whose capacity() is at least `bytes`; its size and contents
  // are unspecified (a spare keeps a closed step's bytes), so the caller
  // sets the size it needs and writes every byte it later reads. Takes the
  // smallest spare that fits, one of exactly `bytes` bytes first (resizing
  // it to `bytes` writes nothing); an empty string when none fits.
  std::string Take(size_t bytes);

  // Replaces the spares with `buffers` (those of the payloads a closed step
  // held; empty ones are not kept). The previous spares are freed.
  void Recycle(std::vector<std::string> buffers);
  // Adds one spare, unless it is empty or the spares already number what
  // the last Recycle kept (then `buffer` is freed): a buffer that served a
  // pull answer (server/return_path.h), given back once no pull holds it.
  void Give(std::string buffer);

  size_t spares() const;
  // Σ capacity() of the spares: the memory they hold.
  size_t spare_bytes() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> spares_;
  size_t limit_ = 0;  // how many the last Recycle kept
};

}  // namespace loco
