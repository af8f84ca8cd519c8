// TestPki: throwaway certificates for the security tests, made with the
// openssl command line into a fresh temporary folder at test time (nothing
// is committed). Two independent CAs:
//   trusted CA -> server (CN=localhost, SAN DNS:localhost, IP:127.0.0.1)
//              -> client (CN=loco-test-client)
//   other CA   -> other_client (CN=loco-intruder), other_server (same SANs
//                 as server)
// EC P-256 keys (fast to make); certificates valid for two days.
#pragma once

#include <string>

#include "common/status.h"

namespace loco::test {

struct TestPki {
  std::string dir;
  std::string ca, server_cert, server_key, client_cert, client_key;
  std::string other_ca, other_client_cert, other_client_key, other_server_cert, other_server_key;

  // Creates the folder and every file; the error says which openssl step
  // failed (its output is in dir/openssl.log).
  static StatusOr<TestPki> Create();
  // Writes `content` to dir/name and returns the path.
  std::string WriteFile(const std::string& name, const std::string& content) const;
};

}  // namespace loco::test
