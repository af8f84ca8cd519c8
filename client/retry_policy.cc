#include "client/retry_policy.h"

#include <algorithm>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "rpc/transport_failure.h"

namespace loco {
namespace {

constexpr int64_t kStopCheckMs = 50;  // how often a backoff looks at `stop`

}  // namespace

std::chrono::milliseconds RetryPolicy::Backoff(int retry) {
  int64_t cap = options_.initial_backoff_ms;
  for (int i = 0; i < retry && cap < options_.max_backoff_ms; ++i) cap *= 2;
  cap = std::min<int64_t>(cap, options_.max_backoff_ms);
  std::lock_guard<std::mutex> l(mu_);
  std::uniform_int_distribution<int64_t> d(0, cap);
  return std::chrono::milliseconds(d(rng_));
}

void RetryPolicy::Pause(std::chrono::milliseconds wait, const std::atomic<bool>* stop) {
  for (int64_t left = wait.count(); left > 0 && !(stop != nullptr && stop->load());
       left -= kStopCheckMs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(left, kStopCheckMs)));
  }
}

std::optional<std::string> RetryPolicy::CheckClosedAtConnect(
    TransportFailure failure, const grpc::Status& s,
    std::optional<std::chrono::steady_clock::time_point>* last_check) const {
  if (failure != TransportFailure::kClosedAtConnect || !closed_at_connect_check_) {
    return std::nullopt;
  }
  const auto now = std::chrono::steady_clock::now();
  if (*last_check && now - **last_check < kClosedAtConnectCheckEvery) return std::nullopt;
  *last_check = now;
  return closed_at_connect_check_(s.error_message());
}

grpc::Status RetryPolicy::Run(const std::string& what,
                              const std::function<grpc::Status()>& attempt,
                              LogPacer* shared_pacer, const std::atomic<bool>* stop) {
  const auto stopped = [stop] { return stop != nullptr && stop->load(); };
  LogPacer own_pacer;
  LogPacer& pacer = shared_pacer != nullptr ? *shared_pacer : own_pacer;
  int64_t slept_ms = 0;
  std::string hint_shown;  // the last hint a line carried
  std::optional<std::chrono::steady_clock::time_point> last_check;  // of the transport
  for (int retry = 0;; ++retry) {
    grpc::Status s = attempt();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
    const TransportFailure failure = ClassifyUnavailable(s.error_message());
    if (RetryCannotCure(failure)) {
      // This process's own TLS handshake refused the peer: every retry
      // would, until a certificate or a flag changes.
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          s.error_message() + TransportHintSuffix(failure));
    }
    if (std::optional<std::string> why = CheckClosedAtConnect(failure, s, &last_check)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, s.error_message() + " (" + *why + ")");
    }
    const bool counted = options_.max_retries >= 0;
    if (stopped()) return s;
    if ((counted && retry >= options_.max_retries) || slept_ms >= options_.retry_budget_ms) {
      return grpc::Status(s.error_code(), s.error_message() + TransportHintSuffix(failure));
    }
    int64_t wait = std::min<int64_t>(Backoff(retry).count(),
                                     options_.retry_budget_ms - slept_ms);
    if (pacer.ShouldLog(std::chrono::steady_clock::now())) {
      std::ostringstream line;
      line << what << ": UNAVAILABLE (" << s.error_message() << "), retry " << (retry + 1);
      if (counted) line << "/" << options_.max_retries;
      line << " in " << wait << " ms";
      // A line says what to check the first time its failure's hint comes
      // up (a server killed mid-call fails with a hintless "Broken pipe"
      // before its restart refuses connections), or else, on the first line
      // of a loop bounded by time alone (such as Join's), the address.
      std::string hint = TransportHint(failure);
      if (hint == hint_shown) hint.clear();
      if (!hint.empty()) hint_shown = hint;
      if (!counted) {
        line << " (backed off " << slept_ms / 1000 << " s of " << options_.retry_budget_ms / 1000
             << " s";
        if (!hint.empty()) {
          line << "; " << hint;
        } else if (retry == 0) {
          line << "; is the address right?";
        }
        line << ")";
      } else if (!hint.empty()) {
        line << " (" << hint << ")";
      }
      LOG_WARN(line.str() << pacer.SinceLastLine("retries"));
    }
    Pause(std::chrono::milliseconds(wait), stop);
    slept_ms += wait;
  }
}

}  // namespace loco
