// ShardService's pulls: Pull (one answer) and PullStream (the answer in
// parts, a delta's or bf16 copy's parts sent while the step computes them).
#include <algorithm>
#include <chrono>

#include "rpc/payload_bytes.h"
#include "rpc/rpc_status.h"
#include "server/pull_response_wire.h"
#include "server/shard_service.h"

namespace loco {
namespace {

Status ParsePullRequest(const grpc::ByteBuffer& bytes, v1::PullRequest* req) {
  std::vector<grpc::Slice> slices;
  std::string joined;
  if (bytes.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      joined.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    if (req->ParseFromString(joined)) return Status::Ok();
  }
  return InvalidArgument("the pull request is not a serialized loco.v1.PullRequest");
}

// A pull never outwaits its caller: past the client's deadline nobody reads
// the answer, and the serving thread would be held for nothing.
void ClampWaitToCall(const grpc::ServerContext& ctx, v1::PullRequest* req) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      ctx.deadline() - std::chrono::system_clock::now());
  if (left.count() < static_cast<int64_t>(req->wait_ms())) {
    req->set_wait_ms(static_cast<uint32_t>(std::max<int64_t>(0, left.count())));
  }
}

// Reads a call's one request (Pull and PullStream alike) and bounds its
// wait by the call's deadline.
template <typename Stream>
Status ReadPullRequest(const grpc::ServerContext& ctx, Stream* stream, v1::PullRequest* req) {
  grpc::ByteBuffer bytes;
  if (!stream->Read(&bytes)) return InvalidArgument("the pull carried no request message");
  LOCO_RETURN_IF_ERROR(ParsePullRequest(bytes, req));
  ClampWaitToCall(ctx, req);
  return Status::Ok();
}

// Bytes of data per chunk of an answer sent whole (a full copy, or a delta
// made before the pull came): a few chunks per answer, each small enough
// for the transport to start sending while the next is queued.
constexpr size_t kWholeAnswerChunk = 1 << 20;

Status CallerGone() {
  return Aborted("the pull's caller went away while its answer was being sent");
}

}  // namespace

// ---------------------------------------------------------------- gRPC edge

grpc::Status ShardService::PullRaw(
    grpc::ServerContext* ctx,
    grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  if (Status allowed = CheckWorkerRole(ctx, "Pull", "pull"); !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  v1::PullRequest req;
  Status s = ReadPullRequest(*ctx, stream, &req);
  if (s.ok()) s = tickets_->Check(req.worker_id(), req.ticket(), "Pull");
  if (s.ok()) {
    v1::PullResponse header;
    ReturnPath::SharedBody body;
    s = shard_.Pull(req, &header, &body);
    // The answer goes out with the call's status, in one batch, as a plain
    // unary answer would. A write to a cancelled call fails; nobody reads it.
    if (s.ok() &&
        stream->Write(PullResponseToWire(header, body), grpc::WriteOptions().set_last_message()) &&
        metrics()) {
      const uint64_t wire_bytes = (body.data ? body.data->size() : 0) +
                                  (body.scales ? body.scales->size() : 0);
      metrics()->OnPullServed(wire_bytes, header.params().length());
    }
  }
  if (metrics()) metrics()->OnRejected("pull", s, nullptr);
  return ToGrpcStatus(s);
}

grpc::Status ShardService::PullStreamRaw(
    grpc::ServerContext* ctx,
    grpc::ServerSplitStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  if (Status allowed = CheckWorkerRole(ctx, "PullStream", "pull"); !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  v1::PullRequest req;
  Status s = ReadPullRequest(*ctx, stream, &req);
  if (s.ok()) s = tickets_->Check(req.worker_id(), req.ticket(), "PullStream");
  uint64_t wire_bytes = 0, length = 0;
  if (s.ok()) {
    s = DoPullStream(
        req, [&] { return ctx->IsCancelled(); },
        [&](grpc::ByteBuffer chunk) { return stream->Write(chunk); }, &wire_bytes, &length);
  }
  if (s.ok() && metrics()) metrics()->OnPullServed(wire_bytes, length);
  if (metrics()) metrics()->OnRejected("pull", s, nullptr);
  return ToGrpcStatus(s);
}

// ---------------------------------------------------------------- PullStream

Status ShardService::DoPullStream(const v1::PullRequest& req,
                                  const std::function<bool()>& cancelled,
                                  const std::function<bool(grpc::ByteBuffer)>& write,
                                  uint64_t* wire_bytes, uint64_t* length) {
  auto next = shard_.NextAnswerFor(req);
  if (!next.ok()) return next.status();
  const auto wait =
      std::min(std::chrono::milliseconds(req.wait_ms()), shard_.options().max_pull_wait);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  if (const std::shared_ptr<AnswerParts> answer = *next) {
    auto sent = SendAnswerParts(*answer, req.worker_id(), deadline, cancelled, write, wire_bytes,
                                length);
    if (!sent.ok()) return sent.status();
    if (*sent) return Status::Ok();
  }
  return SendWholeAnswer(req, deadline, write, wire_bytes, length);
}

// The next version's answer, part by part as the step makes them final.
// Until the step begins it may still turn out to be a full copy (a sync
// version) or not come before the deadline: then the plain path answers.
StatusOr<bool> ShardService::SendAnswerParts(AnswerParts& answer, uint64_t worker_id,
                                             std::chrono::steady_clock::time_point deadline,
                                             const std::function<bool()>& cancelled,
                                             const std::function<bool(grpc::ByteBuffer)>& write,
                                             uint64_t* wire_bytes, uint64_t* length) {
  size_t taken = 0;
  std::vector<AnswerParts::Part> fresh;
  uint64_t sent = 0;
  bool header_sent = false;
  for (;;) {
    // Once parts flow the step is running under the shard's lock and
    // ends soon; the wait is then bounded by the caller's deadline (a
    // cancelled call stops it), not by wait_ms.
    const auto until =
        header_sent ? std::chrono::steady_clock::now() + std::chrono::milliseconds(100)
                    : deadline;
    const AnswerParts::State state = answer.Wait(until, &taken, &fresh);
    if (state == AnswerParts::State::kAbandoned) {
      if (!header_sent) return false;
      return Aborted("the answer of version " + std::to_string(answer.version()) + " of shard " +
                     std::to_string(shard_.options().shard_id) +
                     " was abandoned while it was being sent "
                     "(the step failed or the server is stopping); pull again");
    }
    if (state == AnswerParts::State::kPending) return false;  // the deadline passed first
    if (cancelled()) return CallerGone();
    LOCO_RETURN_IF_ERROR(WriteParts(answer, &fresh, write, &header_sent, &sent, wire_bytes));
    fresh.clear();
    if (sent == answer.header().params().length()) {
      *length = sent;
      shard_.AnswerSent(worker_id, answer.version());
      return true;
    }
  }
}

Status ShardService::WriteParts(const AnswerParts& answer, std::vector<AnswerParts::Part>* fresh,
                                const std::function<bool(grpc::ByteBuffer)>& write,
                                bool* header_sent, uint64_t* sent, uint64_t* wire_bytes) {
  const v1::PullResponse& header = answer.header();
  const v1::Payload& p = header.params();
  // Adjacent parts go out as one chunk, up to kWholeAnswerChunk bytes.
  std::sort(fresh->begin(), fresh->end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < fresh->size();) {
    uint64_t begin = (*fresh)[i].begin, end = begin + (*fresh)[i].count;
    for (++i; i < fresh->size() && (*fresh)[i].begin == end &&
              PayloadDataBytes(p, end - begin) < kWholeAnswerChunk;
         ++i) {
      end += (*fresh)[i].count;
    }
    const size_t data_at = PayloadDataBytes(p, begin);
    const size_t data_bytes = PayloadDataBytes(p, end) - data_at;
    const size_t scales_at = PayloadScaleBytes(p, begin);
    const size_t scales_bytes = PayloadScaleBytes(p, end) - scales_at;
    if (!write(PullChunkToWire(*header_sent ? nullptr : &header, answer.data(), data_at,
                               data_bytes, answer.scales(), scales_at, scales_bytes))) {
      return CallerGone();
    }
    *header_sent = true;
    *sent += end - begin;
    *wire_bytes += data_bytes + scales_bytes;
    if (metrics()) metrics()->OnPullParts(1);
  }
  return Status::Ok();
}

// The plain path: the answer Pull gives, in chunks of its shared body.
Status ShardService::SendWholeAnswer(const v1::PullRequest& req,
                                     std::chrono::steady_clock::time_point deadline,
                                     const std::function<bool(grpc::ByteBuffer)>& write,
                                     uint64_t* wire_bytes, uint64_t* length) {
  v1::PullRequest rest = req;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  rest.set_wait_ms(static_cast<uint32_t>(std::max<int64_t>(0, left.count())));
  v1::PullResponse header;
  ReturnPath::SharedBody body;
  LOCO_RETURN_IF_ERROR(shard_.Pull(rest, &header, &body));
  const size_t data_bytes = body.data ? body.data->size() : 0;
  const size_t scales_bytes = body.scales ? body.scales->size() : 0;
  size_t at = 0;
  do {
    const size_t n = std::min(kWholeAnswerChunk, data_bytes - at);
    if (!write(PullChunkToWire(at == 0 ? &header : nullptr, body.data, at, n, body.scales, 0,
                               at == 0 ? scales_bytes : 0))) {
      return CallerGone();
    }
    at += n;
  } while (at < data_bytes);
  *wire_bytes = data_bytes + scales_bytes;
  *length = header.params().length();
  return Status::Ok();
}

}  // namespace loco
