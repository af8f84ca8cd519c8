#include "client/retry_policy.h"

#include <algorithm>
#include <thread>

#include "common/log.h"

namespace loco {

std::chrono::milliseconds RetryPolicy::Backoff(int retry) {
  int64_t cap = options_.initial_backoff_ms;
  for (int i = 0; i < retry && cap < options_.max_backoff_ms; ++i) cap *= 2;
  cap = std::min<int64_t>(cap, options_.max_backoff_ms);
  std::lock_guard<std::mutex> l(mu_);
  std::uniform_int_distribution<int64_t> d(0, cap);
  return std::chrono::milliseconds(d(rng_));
}

grpc::Status RetryPolicy::Run(const std::string& what,
                              const std::function<grpc::Status()>& attempt) {
  int64_t slept_ms = 0;
  for (int retry = 0;; ++retry) {
    grpc::Status s = attempt();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
    if (retry >= options_.max_retries || slept_ms >= options_.retry_budget_ms) return s;
    int64_t wait = std::min<int64_t>(Backoff(retry).count(),
                                     options_.retry_budget_ms - slept_ms);
    LOG_WARN(what << ": UNAVAILABLE (" << s.error_message() << "), retry " << (retry + 1)
                  << "/" << options_.max_retries << " in " << wait << " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    slept_ms += wait;
  }
}

}  // namespace loco
