#include "security/plaintext_token_credentials.h"

#include <grpc/grpc.h>
#include <grpc/slice.h>

#include "common/log.h"

namespace loco {
namespace {

grpc::string_ref Ref(const grpc_slice& s) {
  return grpc::string_ref(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)),
                          GRPC_SLICE_LENGTH(s));
}

// The core's callback: runs the processor inline (it never blocks) and
// reports its verdict. Nothing is consumed: plaintext has no secret to hide
// from handlers that the wire did not already show.
void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md, size_t num_md,
             grpc_process_auth_metadata_done_cb cb, void* user_data) {
  auto& processor = *static_cast<std::shared_ptr<BearerTokenProcessor>*>(state);
  grpc::AuthMetadataProcessor::InputMetadata input;
  for (size_t i = 0; i < num_md; ++i) input.insert({Ref(md[i].key), Ref(md[i].value)});
  grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
  grpc::Status s = processor->Process(input, nullptr, &consumed, &response);
  cb(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(s.error_code()),
     s.ok() ? nullptr : s.error_message().c_str());
}

}  // namespace

PlaintextTokenCredentials::PlaintextTokenCredentials(
    std::shared_ptr<BearerTokenProcessor> processor)
    : processor_(std::move(processor)), creds_(grpc_insecure_server_credentials_create()) {
  grpc_auth_metadata_processor p;
  p.process = Process;
  // The core keeps the credentials (and calls this) after this object is
  // gone, so it owns a reference of its own, released by `destroy`.
  p.destroy = [](void* state) { delete static_cast<std::shared_ptr<BearerTokenProcessor>*>(state); };
  p.state = new std::shared_ptr<BearerTokenProcessor>(processor_);
  grpc_server_credentials_set_auth_metadata_processor(creds_, p);
}

PlaintextTokenCredentials::~PlaintextTokenCredentials() { grpc_server_credentials_release(creds_); }

void PlaintextTokenCredentials::SetAuthMetadataProcessor(
    const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) {
  if (processor.get() != processor_.get()) {
    LOG_ERROR("PlaintextTokenCredentials: a different AuthMetadataProcessor was ignored");
  }
}

int PlaintextTokenCredentials::AddPortToServer(const std::string& addr, grpc_server* server) {
  return grpc_server_add_http2_port(server, addr.c_str(), creds_);
}

}  // namespace loco
