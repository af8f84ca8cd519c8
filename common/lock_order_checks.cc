#include "common/lock_order_checks.h"

#include <absl/synchronization/mutex.h>

namespace loco {

void DisableLockOrderChecks() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace loco
