#include "proto/push_chunks.h"

#include <algorithm>
#include <memory>
#include <string>

namespace loco {

grpc::Status SendPushInChunks(v1::ParameterServer::StubInterface& stub, grpc::ClientContext* ctx,
                              const v1::PushRequest& req, size_t chunk_bytes,
                              v1::PushResponse* resp) {
  std::unique_ptr<grpc::ClientWriterInterface<v1::PushChunk>> writer =
      stub.PushStream(ctx, resp);
  const std::string& data = req.gradient().data();
  v1::PushChunk chunk;
  // The header: every field but the data, set one by one rather than
  // copying the request, whose data is the bulk of it.
  v1::PushRequest* header = chunk.mutable_header();
  header->set_worker_id(req.worker_id());
  header->set_shard_id(req.shard_id());
  header->set_step(req.step());
  const v1::Payload& g = req.gradient();
  v1::Payload* h = header->mutable_gradient();
  h->set_codec(g.codec());
  h->set_bits(g.bits());
  h->set_block_size(g.block_size());
  h->set_offset(g.offset());
  h->set_length(g.length());
  h->set_scales(g.scales());
  size_t sent = 0;
  do {
    const size_t n = std::min(chunk_bytes, data.size() - sent);
    chunk.set_data(data.data() + sent, n);
    sent += n;
    // A failed write means the call is over (the server refused a chunk or
    // the deadline passed): Finish says why.
    if (!writer->Write(chunk)) break;
    chunk.clear_header();
  } while (sent < data.size());
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace loco
