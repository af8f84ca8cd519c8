#include "client/push_chunks.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/sync_stream.h>

#include "proto/loco.grpc.pb.h"
#include "rpc/wire_format.h"

namespace loco {
std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> OpenPushStream(
    const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx,
    v1::PushResponse* resp) {
  const std::string name =
      "/" + std::string(v1::ParameterServer::service_full_name()) + "/PushStream";
  const grpc::internal::RpcMethod method(name.c_str(),
                                         grpc::internal::RpcMethod::CLIENT_STREAMING, channel);
  return std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>>(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel.get(), method, ctx,
                                                                    resp));
}

v1::PushRequest PushStreamHeader(const v1::PushRequest& req, bool with_scales) {
  v1::PushRequest header;
  header.set_worker_id(req.worker_id());
  header.set_ticket(req.ticket());
  header.set_shard_id(req.shard_id());
  header.set_step(req.step());
  if (req.has_hyper()) *header.mutable_hyper() = req.hyper();
  const v1::Payload& g = req.gradient();
  v1::Payload* h = header.mutable_gradient();
  h->set_codec(g.codec());
  h->set_bits(g.bits());
  h->set_block_size(g.block_size());
  h->set_offset(g.offset());
  h->set_length(g.length());
  if (with_scales) h->set_scales(g.scales());
  return header;
}

grpc::Status SendPushInChunks(const std::shared_ptr<grpc::Channel>& channel,
                              grpc::ClientContext* ctx, const v1::PushRequest& req,
                              size_t chunk_bytes, v1::PushResponse* resp) {
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer =
      OpenPushStream(channel, ctx, resp);
  const std::string& data = req.gradient().data();
  // The first chunk's header: the request without the data.
  v1::PushChunk first;
  *first.mutable_header() = PushStreamHeader(req, /*with_scales=*/true);
  std::string head = first.SerializeAsString();
  size_t sent = 0;
  do {
    const size_t n = std::min(chunk_bytes, data.size() - sent);
    std::vector<grpc::Slice> slices;
    if (n > 0) wire::AppendKeyAndLength(v1::PushChunk::kDataFieldNumber, n, &head);
    slices.emplace_back(head);
    if (n > 0) {
      // Not owned: gRPC reads it until the write completes, and `req`
      // outlives the call (see the header).
      slices.emplace_back(data.data() + sent, n, grpc::Slice::STATIC_SLICE);
    }
    sent += n;
    // A failed write means the call is over (the server refused a chunk or
    // the deadline passed): Finish says why.
    if (!writer->Write(grpc::ByteBuffer(slices.data(), slices.size()))) break;
    head.clear();
  } while (sent < data.size());
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace loco
