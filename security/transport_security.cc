#include "security/transport_security.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/client_interceptor.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "common/host_port.h"
#include "common/log.h"
#include "security/bearer_token.h"
#include "security/bearer_token_processor.h"
#include "security/peer_tls_probe.h"
#include "security/plaintext_token_credentials.h"

namespace loco {
namespace {

StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("--" + flag + " '" + path + "' cannot be opened for reading");
  std::ostringstream s;
  s << in.rdbuf();
  std::string pem = s.str();
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return InvalidArgument("--" + flag + " '" + path +
                           "' holds no PEM block (-----BEGIN ...); expected a PEM file");
  }
  return pem;
}

// OpenSSL asks this for the passphrase of an encrypted key: it gives none,
// so that reading never prompts on a terminal (gRPC could not use such a key
// either).
int NoPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) { return 0; }

// The certificate and key of --tls-cert/--tls-key as PEM text: each must
// parse, and the key must be the certificate's (its public half the one the
// certificate carries). gRPC would find a mismatch only when the server
// starts, or at a client's first handshake, and say nothing about which
// file is wrong. Leaves OpenSSL's error queue empty.
Status CheckKeyPair(const TransportSecurityOptions& options, const std::string& cert_pem,
                    const std::string& key_pem) {
  using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
  Bio cert_bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), BIO_free);
  Bio key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, NoPassphrase, nullptr) : nullptr,
      X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr) : nullptr,
      EVP_PKEY_free);
  const bool match = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  if (!cert) {
    return InvalidArgument("--tls-cert '" + options.tls_cert +
                           "' holds no certificate that can be read; expected a PEM "
                           "certificate (-----BEGIN CERTIFICATE-----)");
  }
  if (!key) {
    return InvalidArgument("--tls-key '" + options.tls_key +
                           "' holds no private key that can be read; expected an unencrypted "
                           "PEM private key (-----BEGIN PRIVATE KEY-----, or an RSA or EC one)");
  }
  if (!match) {
    return InvalidArgument("--tls-key '" + options.tls_key +
                           "' is not the private key of --tls-cert '" + options.tls_cert +
                           "' (the certificate carries another public key); expected the key "
                           "the certificate was issued for");
  }
  return Status::Ok();
}

// Adds `authorization: Bearer <token>` to every call of a channel.
class BearerTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // owned by the factory, which the channel keeps
};

class BearerTokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_(BearerHeaderValue(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

StatusOr<std::shared_ptr<const TransportSecurity>> TransportSecurity::Load(
    const TransportSecurityOptions& options, TransportRole role) {
  LOCO_RETURN_IF_ERROR(ValidateTransportSecurityOptions(options, role));
  std::shared_ptr<TransportSecurity> t(new TransportSecurity());
  t->options_ = options;
  t->role_ = role;
  if (!options.tls_cert.empty()) {
    auto cert = ReadPem("tls-cert", options.tls_cert);
    if (!cert.ok()) return cert.status();
    auto key = ReadPem("tls-key", options.tls_key);
    if (!key.ok()) return key.status();
    LOCO_RETURN_IF_ERROR(CheckKeyPair(options, *cert, *key));
    t->cert_pem_ = std::move(cert).value();
    t->key_pem_ = std::move(key).value();
  }
  if (!options.tls_ca.empty()) {
    auto ca = ReadPem("tls-ca", options.tls_ca);
    if (!ca.ok()) return ca.status();
    t->ca_pem_ = std::move(ca).value();
  }
  if (!options.auth_token_file.empty()) {
    auto token = ReadBearerToken(options.auth_token_file);
    if (!token.ok()) return token.status();
    t->token_ = std::move(token).value();
  }
  if (!options.worker_token_file.empty()) {
    auto worker = ReadBearerToken(options.worker_token_file);
    if (!worker.ok()) return worker.status().Annotate("--worker-token-file");
    auto server = ReadBearerToken(options.server_token_file);
    if (!server.ok()) return server.status().Annotate("--server-token-file");
    t->worker_token_ = std::move(worker).value();
    t->server_token_ = std::move(server).value();
  }
  RolePolicy::Config roles;
  roles.shared_token = t->token_;
  roles.worker_token = t->worker_token_;
  roles.server_token = t->server_token_;
  roles.certificate_roles = options.tls_client_roles;
  auto policy = RolePolicy::Make(std::move(roles));
  if (!policy.ok()) return policy.status();
  t->role_policy_ = std::make_shared<const RolePolicy>(std::move(policy).value());
  return std::shared_ptr<const TransportSecurity>(std::move(t));
}

std::vector<std::string> TransportSecurity::AcceptedTokens() const {
  if (!worker_token_.empty()) return {worker_token_, server_token_};
  if (!token_.empty()) return {token_};
  return {};
}

const std::string& TransportSecurity::PresentedToken() const {
  return server_token_.empty() ? token_ : server_token_;
}

void TransportSecurity::LogStartupWarnings(const std::string& process) const {
  if (role_ != TransportRole::kClient && !role_policy_->separated()) {
    LOG_WARN(process << ": roles are not separated: "
             << (token_.empty() ? std::string("every caller")
                                : std::string("every holder of --auth-token-file"))
             << " may act as a worker and as a server (RegisterServer can re-point a shard); "
                "give --worker-token-file and --server-token-file, or --tls-client-roles");
  }
  if (!options_.insecure) return;
  LOG_WARN(process << ": --insecure: plaintext: for trusted networks only");
  if (has_token()) {
    LOG_WARN(process << ": --auth-token-file with --insecure: the bearer token travels in "
                        "plaintext; anyone on the network path can read and replay it");
  }
}

std::string TransportSecurity::Describe() const {
  std::string d = options_.insecure ? "plaintext" : "TLS";
  if (!options_.insecure && options_.tls_client_auth) d += ", client certificates required";
  if (!options_.insecure && role_ != TransportRole::kServer && !cert_pem_.empty()) {
    d += ", client certificate presented";
  }
  if (!worker_token_.empty()) {
    d += ", role tokens (worker, server)";
  } else if (has_token()) {
    d += ", bearer token";
  }
  if (options_.tls_client_roles) d += ", roles from client certificates";
  return d;
}

std::shared_ptr<grpc::ServerCredentials> TransportSecurity::ServerCredentials(
    std::shared_ptr<AuthRejections> rejections) const {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options_.insecure && has_token()) {
    // grpc::InsecureServerCredentials() cannot take a processor (it aborts).
    return std::make_shared<PlaintextTokenCredentials>(
        std::make_shared<BearerTokenProcessor>(AcceptedTokens(), std::move(rejections)));
  }
  if (options_.insecure) {
    creds = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions ssl(
        options_.tls_client_auth ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    if (options_.tls_client_auth) ssl.pem_root_certs = ca_pem_;
    ssl.pem_key_cert_pairs.push_back({key_pem_, cert_pem_});
    creds = grpc::SslServerCredentials(ssl);
  }
  if (has_token()) {
    creds->SetAuthMetadataProcessor(
        std::make_shared<BearerTokenProcessor>(AcceptedTokens(), std::move(rejections)));
  }
  return creds;
}

std::shared_ptr<grpc::Channel> TransportSecurity::CreateChannel(const std::string& target,
                                                                grpc::ChannelArguments args) const {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options_.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ca_pem_;  // empty: gRPC's default roots
    ssl.pem_private_key = key_pem_;
    ssl.pem_cert_chain = cert_pem_;
    creds = grpc::SslCredentials(ssl);
    if (!options_.tls_server_name.empty()) args.SetSslTargetNameOverride(options_.tls_server_name);
  }
  if (PresentedToken().empty()) return grpc::CreateCustomChannel(target, creds, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(PresentedToken()));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, args,
                                                                 std::move(interceptors));
}

std::optional<std::string> TransportSecurity::RefusalOfThisTransport(
    std::string_view message) const {
  const std::optional<PeerAddress> peer = PeerAddressIn(message);
  if (!peer) return std::nullopt;
  // With a certificate of its own, the probe presents it.
  const bool presents_certificate = !options_.insecure && !cert_pem_.empty();
  const ProbeIdentity identity{cert_pem_, key_pem_};
  std::string alert;
  PeerTls verdict =
      ProbePeerTls(*peer, kRefusalProbeTimeout, presents_certificate ? &identity : nullptr, &alert);
  if (verdict == PeerTls::kRefusesOurCertificate && alert.empty()) {
    // A close without an alert: a peer that is shutting down can close a
    // connection it has just accepted too, but it cannot accept the next.
    verdict = ProbePeerTls(*peer, kRefusalProbeTimeout, &identity, &alert);
  }
  const std::string at = "the peer at " + JoinHostPort(peer->host, peer->port);
  if (options_.insecure && (verdict == PeerTls::kTls || verdict == PeerTls::kRequiresClientCert)) {
    return at +
           " speaks TLS, and this process connects in plaintext (--insecure, insecure): "
           "give --tls-ca (tls_ca), the CA that signed the peer's --tls-cert, instead";
  }
  if (!options_.insecure && verdict == PeerTls::kRequiresClientCert) {
    return at +
           " requires a client certificate (it runs with --tls-client-auth), and this "
           "process presents none: give --tls-cert and --tls-key (tls_cert, tls_key), a "
           "certificate signed by a CA in the peer's --tls-ca";
  }
  if (presents_certificate && verdict == PeerTls::kRefusesOurCertificate) {
    const std::string how = alert.empty()
                                ? "closing two connections right after the TLS handshakes in "
                                  "which it was presented"
                                : "the TLS alert \"" + alert + "\"";
    return at + " refuses this process's certificate (--tls-cert, tls_cert), by " + how +
           ": give a certificate signed by a CA in the peer's --tls-ca, or add the CA that "
           "signed this one to it, and check that it has not expired";
  }
  return std::nullopt;
}

}  // namespace loco
