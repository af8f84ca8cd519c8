#include "tests/security/test_pki.h"

#include <cstdlib>
#include <fstream>

namespace loco::test {
namespace {

constexpr const char* kConfig = R"([req]
distinguished_name = dn
prompt = no
[dn]
CN = loco-test
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
)";

Status Run(const std::string& dir, const std::string& command) {
  const std::string full = "cd '" + dir + "' && " + command + " >>openssl.log 2>&1";
  if (std::system(full.c_str()) != 0) {
    return Internal("'" + command + "' failed; see " + dir + "/openssl.log");
  }
  return Status::Ok();
}

Status MakeCa(const std::string& dir, const std::string& name) {
  return Run(dir, "openssl req -x509 -config pki.cnf -extensions v3_ca -newkey ec -pkeyopt "
                  "ec_paramgen_curve:P-256 -nodes -keyout " + name + ".key -out " + name +
                  ".pem -days 2 -subj /CN=" + name);
}

Status MakeLeaf(const std::string& dir, const std::string& ca, const std::string& name,
                const std::string& cn, int serial) {
  LOCO_RETURN_IF_ERROR(Run(dir, "openssl req -new -config pki.cnf -newkey ec -pkeyopt "
                                "ec_paramgen_curve:P-256 -nodes -keyout " + name +
                                ".key -out " + name + ".csr -subj /CN=" + cn));
  return Run(dir, "openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
                      ".key -set_serial " + std::to_string(serial) +
                      " -days 2 -extfile pki.cnf -extensions leaf -out " + name + ".pem");
}

}  // namespace

std::string TestPki::WriteFile(const std::string& name, const std::string& content) const {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

StatusOr<TestPki> TestPki::Create() {
  char tmpl[] = "/tmp/loco-pki.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return Internal("mkdtemp failed");
  TestPki p;
  p.dir = tmpl;
  p.WriteFile("pki.cnf", kConfig);
  LOCO_RETURN_IF_ERROR(MakeCa(p.dir, "ca"));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "ca", "server", "localhost", 2));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "ca", "client", "loco-test-client", 3));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "ca", "role-shard0", "loco-server.shard-0", 6));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "ca", "role-shard1", "loco-server.shard-1", 7));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "ca", "role-any-server", "loco-server", 8));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "ca", "role-worker", "loco-worker.test", 9));
  LOCO_RETURN_IF_ERROR(MakeCa(p.dir, "other-ca"));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "other-ca", "other-client", "loco-intruder", 4));
  LOCO_RETURN_IF_ERROR(MakeLeaf(p.dir, "other-ca", "other-server", "localhost", 5));
  auto at = [&](const std::string& f) { return p.dir + "/" + f; };
  p.ca = at("ca.pem");
  p.server_cert = at("server.pem");
  p.server_key = at("server.key");
  p.client_cert = at("client.pem");
  p.client_key = at("client.key");
  p.role_shard0_cert = at("role-shard0.pem");
  p.role_shard0_key = at("role-shard0.key");
  p.role_shard1_cert = at("role-shard1.pem");
  p.role_shard1_key = at("role-shard1.key");
  p.role_any_server_cert = at("role-any-server.pem");
  p.role_any_server_key = at("role-any-server.key");
  p.role_worker_cert = at("role-worker.pem");
  p.role_worker_key = at("role-worker.key");
  p.other_ca = at("other-ca.pem");
  p.other_client_cert = at("other-client.pem");
  p.other_client_key = at("other-client.key");
  p.other_server_cert = at("other-server.pem");
  p.other_server_key = at("other-server.key");
  return p;
}

}  // namespace loco::test
