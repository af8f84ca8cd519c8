// AuthRejections: what a server does with a call refused for its
// credentials — count it by reason in Prometheus and log it once per client.
//
//   loco_auth_rejected_total{reason}   reason = missing_token | malformed_token
//                                      | bad_token
//
// A TLS handshake that fails (no client certificate, one from another CA, a
// plaintext client on a TLS port) is refused inside gRPC's transport before
// any call exists; gRPC 1.51 gives the application no hook there, so those
// are not counted here (gRPC logs them itself).
//
// Logging: one line per distinct client the first time it is refused, so a
// misconfigured client retrying in a loop does not flood the log. The set of
// clients already logged is bounded (kMaxLoggedClients); past it, one line
// says that further clients are not logged individually.
//
// Thread-safe: gRPC calls OnRejected from its own threads.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

namespace loco {

enum class AuthRejectReason { kMissingToken, kMalformedToken, kBadToken };
// "missing_token", "malformed_token", "bad_token": the metric's label value.
const char* AuthRejectReasonName(AuthRejectReason r);

class AuthRejections {
 public:
  static constexpr size_t kMaxLoggedClients = 1024;

  // Registers the counter family in `registry` (which must outlive this
  // object) with `const_labels` on every series (e.g. {"shard", "0"}).
  AuthRejections(prometheus::Registry& registry,
                 const std::map<std::string, std::string>& const_labels);

  // One refused call. `client`
  // identifies the caller as well as the server can see it (see
  // BearerTokenProcessor).
  void OnRejected(AuthRejectReason reason, const std::string& client);

  // Refusals counted so far for `reason` (tests; the scrape says the same).
  double Count(AuthRejectReason reason) const;

 private:
  prometheus::Family<prometheus::Counter>& family_;
  prometheus::Counter& missing_;
  prometheus::Counter& malformed_;
  prometheus::Counter& bad_;
  prometheus::Counter& CounterFor(AuthRejectReason r) const;

  std::mutex mu_;
  std::set<std::string> logged_;  // clients already logged; at most kMaxLoggedClients
  bool overflow_logged_ = false;
};

}  // namespace loco
