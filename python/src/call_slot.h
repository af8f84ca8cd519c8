// CallSlot: one call at a time on a Worker. loco::Worker's calls that talk
// to the cluster must not overlap; a _core.Worker call made while another
// is in progress is refused instead of racing it.
//
// Unlike a mutex, the slot may be given back by another thread than the one
// that took it: a background step (python/src/background_step.h) takes it
// on the training thread and gives it back on its own thread when the step
// ends.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <optional>
#include <semaphore>

namespace loco::python {

class CallSlot {
 public:
  // The slot, taken; given back when destroyed (or Release), on whichever
  // thread that happens.
  class Held {
   public:
    Held(Held&& other) noexcept : slot_(other.slot_) { other.slot_ = nullptr; }
    Held& operator=(Held&& other) noexcept {
      if (this != &other) {
        Release();
        slot_ = other.slot_;
        other.slot_ = nullptr;
      }
      return *this;
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() { Release(); }

    void Release() {
      if (slot_ != nullptr) slot_->free_.release();
      slot_ = nullptr;
    }

   private:
    friend class CallSlot;
    explicit Held(CallSlot* slot) : slot_(slot) {}
    CallSlot* slot_;  // null once given back
  };

  // The slot, or none while another call holds it.
  std::optional<Held> TryTake() {
    if (!free_.try_acquire()) return std::nullopt;
    return Held(this);
  }
  // Waits until the slot is free. Call without the GIL: the holder may
  // need it to finish.
  Held Take() {
    free_.acquire();
    return Held(this);
  }

 private:
  std::binary_semaphore free_{1};
};

}  // namespace loco::python
