// PullResponseToWire: a pull answer serialized for gRPC without copying its
// body.
//
// The header (every field but the payload's data and scales) is serialized
// by protobuf; the shared body's bytes become slices that keep a reference
// to the body (ReturnPath::SharedBody), so the W concurrent pulls of one
// version share one copy of it until the transport has sent them. Copying
// the body into a PullResponse and letting gRPC serialize that would hold
// it twice per pull (the message's string and the serialized slices).
//
// The bytes parse as the v1::PullResponse that ReturnPath::Attach(body,
// header) would give; only the order of the fields on the wire differs.
// Precondition: header.params() has no data and no scales.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <grpcpp/support/byte_buffer.h>

#include "proto/loco.pb.h"
#include "server/return_path.h"

namespace loco {

grpc::ByteBuffer PullResponseToWire(const v1::PullResponse& header,
                                    const ReturnPath::SharedBody& body);

// One chunk of a pull answered in parts (v1::PullChunk): `header` (null for
// every chunk but the first), then bytes [data_offset, data_offset +
// data_bytes) of `data` and [scales_offset, scales_offset + scales_bytes)
// of `scales` (either may be null when its count is 0) as slices that keep
// a reference to their buffer. Precondition: the ranges lie inside the
// buffers, and header->params() has no data and no scales.
grpc::ByteBuffer PullChunkToWire(const v1::PullResponse* header,
                                 const std::shared_ptr<const std::string>& data,
                                 size_t data_offset, size_t data_bytes,
                                 const std::shared_ptr<const std::string>& scales,
                                 size_t scales_offset, size_t scales_bytes);

}  // namespace loco
