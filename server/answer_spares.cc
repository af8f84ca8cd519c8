#include "server/answer_spares.h"

#include <utility>

#include "server/give_back_on_release.h"

namespace loco {

std::shared_ptr<std::string> AnswerSpares::Make(Kind kind, size_t bytes) {
  const size_t slot = static_cast<size_t>(kind);
  std::string buffer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    buffer = std::move(spares_[slot]);
    spares_[slot].clear();  // a moved-from string is valid but unspecified
  }
  buffer.resize(bytes);
  return GiveBackOnRelease(std::move(buffer), weak_from_this(),
                           [kind](AnswerSpares& to, std::string&& b) {
                             to.GiveBack(kind, std::move(b));
                           });
}

void AnswerSpares::GiveBack(Kind kind, std::string buffer) {
  if (buffer.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::string& slot = spares_[static_cast<size_t>(kind)];
  if (slot.empty()) slot = std::move(buffer);
}

size_t AnswerSpares::spare_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0;
  for (const std::string& s : spares_) {
    if (!s.empty()) total += s.capacity();
  }
  return total;
}

}  // namespace loco
