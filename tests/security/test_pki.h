// TestPki: throwaway certificates for the security tests, made with the
// openssl command line into a fresh temporary folder at test time (nothing
// is committed). Two independent CAs:
//   trusted CA -> server (CN=localhost, SAN DNS:localhost, IP:127.0.0.1)
//              -> client (CN=loco-test-client)
//              -> role certificates for --tls-client-roles, each with the
//                 server's SANs: role_shard0 (CN=loco-server.shard-0),
//                 role_shard1 (CN=loco-server.shard-1), role_any_server
//                 (CN=loco-server), role_worker (CN=loco-worker.test)
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
  std::string role_shard0_cert, role_shard0_key, role_shard1_cert, role_shard1_key;
  std::string role_any_server_cert, role_any_server_key, role_worker_cert, role_worker_key;
  std::string other_ca, other_client_cert, other_client_key, other_server_cert, other_server_key;

  // Creates the folder and every file; the error says which openssl step
  // failed (its output is in dir/openssl.log).
  static StatusOr<TestPki> Create();
  // Writes `content` to dir/name and returns the path.
  std::string WriteFile(const std::string& name, const std::string& content) const;
};

}  // namespace loco::test
