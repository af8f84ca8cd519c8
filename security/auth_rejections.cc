#include "security/auth_rejections.h"

#include "common/log.h"

namespace loco {

const char* AuthRejectReasonName(AuthRejectReason r) {
  switch (r) {
    case AuthRejectReason::kMissingToken: return "missing_token";
    case AuthRejectReason::kMalformedToken: return "malformed_token";
    case AuthRejectReason::kBadToken: return "bad_token";
  }
  return "unknown";
}

AuthRejections::AuthRejections(prometheus::Registry& registry,
                               const std::map<std::string, std::string>& const_labels)
    : family_(prometheus::BuildCounter()
                  .Name("loco_auth_rejected_total")
                  .Help("Calls refused for their credentials before reaching a handler, by "
                        "reason (missing, malformed or wrong bearer token)")
                  .Labels(const_labels)
                  .Register(registry)),
      missing_(family_.Add({{"reason", AuthRejectReasonName(AuthRejectReason::kMissingToken)}})),
      malformed_(
          family_.Add({{"reason", AuthRejectReasonName(AuthRejectReason::kMalformedToken)}})),
      bad_(family_.Add({{"reason", AuthRejectReasonName(AuthRejectReason::kBadToken)}})) {}

prometheus::Counter& AuthRejections::CounterFor(AuthRejectReason r) const {
  switch (r) {
    case AuthRejectReason::kMissingToken: return missing_;
    case AuthRejectReason::kMalformedToken: return malformed_;
    case AuthRejectReason::kBadToken: return bad_;
  }
  return bad_;
}

void AuthRejections::OnRejected(AuthRejectReason reason, const std::string& client) {
  CounterFor(reason).Increment();
  std::lock_guard<std::mutex> lock(mu_);
  if (logged_.count(client) > 0) return;
  if (logged_.size() >= kMaxLoggedClients) {
    if (!overflow_logged_) {
      overflow_logged_ = true;
      LOG_WARN("refused calls from more than " << kMaxLoggedClients
               << " distinct clients; further clients are counted in "
                  "loco_auth_rejected_total but not logged");
    }
    return;
  }
  logged_.insert(client);
  LOG_WARN("refused a call (" << AuthRejectReasonName(reason) << ") from " << client
           << "; further refusals of this client are counted in loco_auth_rejected_total, "
              "not logged");
}

double AuthRejections::Count(AuthRejectReason reason) const { return CounterFor(reason).Value(); }

}  // namespace loco
