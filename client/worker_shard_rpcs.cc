// WorkerImpl's per-shard RPCs: InitShard, the step's push (whole or in
// parts as the gradient becomes final) and pull (a stream opened early, or
// polling Pulls), and applying an answer to the worker's copy. The rest of
// WorkerImpl is in client/worker_impl.cc and client/worker_step.cc; the
// contract is in client/worker.h.
#include "client/worker_impl.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "common/log.h"
#include "rpc/payload_bytes.h"
#include "client/placed_push_stream.h"
#include "client/push_chunks.h"
#include "rpc/rpc_status.h"
#include "client/param_payload_decoder.h"

namespace loco {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point started) {
  return std::chrono::duration<double>(SteadyClock::now() - started).count();
}

// Pushes of one step to one shard after its server went away and came back.
constexpr int kMaxRepushRounds = 16;
// Shortest pause between rounds of retries while a server is away.
constexpr std::chrono::milliseconds kMinAwayPause{20};

// Elements per part of a push sent in parts: at least one chunk's worth of
// data (fewer, larger writes), in whole alignment units of the encoder;
// the shard's start may leave a smaller one.
size_t PushPartElements(const ShardEncoder& encoder, size_t chunk_bytes, uint64_t length,
                        const v1::Payload& gradient) {
  const size_t align = encoder.part_alignment();
  const uint64_t chunk_elements =
      uint64_t{chunk_bytes} * length / std::max<size_t>(1, PayloadDataBytes(gradient, length));
  return std::max<size_t>(align, chunk_elements / align * align);
}

// A push carries the shard's hyper-parameters when the trainer set some
// (Worker::SetStepHyper); the request is reused across steps, so an empty
// set clears what an earlier step carried.
void SetPushHyper(const v1::StepHyper& hyper, v1::PushRequest* req) {
  if (hyper.groups_size() == 0) {
    req->clear_hyper();
  } else {
    *req->mutable_hyper() = hyper;
  }
}

// A push refused with one of these will not be taken by a retry, so the
// step cannot complete for this worker (FAILED_PRECONDITION resynchronises
// instead; ABORTED means the gradient was not computed, which every shard
// sees for itself).
bool EndsTheStep(const Status& push) {
  return !push.ok() && push.code() != StatusCode::kFailedPrecondition &&
         push.code() != StatusCode::kAborted;
}

}  // namespace

Status WorkerImpl::InitShard(Shard& shard, std::span<const float> initial, StepAbort* abort) {
  v1::InitShardRequest req;
  req.set_worker_id(worker_id_.load());
  req.set_ticket(ticket());
  req.set_shard_id(shard.id);
  v1::Payload* p = req.mutable_params();
  p->set_codec(v1::CODEC_FP32);
  p->set_offset(shard.offset);
  p->set_length(shard.length);
  p->set_data(reinterpret_cast<const char*>(initial.data() + shard.offset),
              shard.length * sizeof(float));
  v1::InitShardResponse resp;
  grpc::Status s = retry_.Run(
      "InitShard " + std::to_string(shard.id),
      [&] {
        grpc::ClientContext ctx;
        const StepAbortScope cancelled_with_the_offer(abort, &ctx);
        ctx.set_deadline(std::chrono::system_clock::now() + InitShardTimeout(options_));
        return shard.stub->InitShard(&ctx, req, &resp);
      },
      /*pacer=*/nullptr, &step_interrupted_);
  if (s.ok() || s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return Status::Ok();
  if (abort != nullptr && abort->aborted()) {
    return abort->reason().Annotate("InitShard " + std::to_string(shard.id) + " at " +
                                    shard.address);
  }
  return FromGrpcStatus(s).Annotate("InitShard " + std::to_string(shard.id) + " at " +
                                    shard.address);
}

Status WorkerImpl::PushShard(Shard& shard, std::span<const float> grads, uint64_t step,
                             EncodeStats* stats, UplinkTurn& turn, v1::PushRequest* out_req) {
  v1::PushRequest& req = *out_req;
  req.set_worker_id(worker_id_.load());
  req.set_ticket(ticket());
  req.set_shard_id(shard.id);
  req.set_step(step);
  SetPushHyper(shard.hyper, &req);
  const auto encode_started = SteadyClock::now();
  LOCO_RETURN_IF_ERROR(shard.encoder->Encode(grads.subspan(shard.offset, shard.length),
                                             static_cast<int64_t>(step),
                                             req.mutable_gradient(), stats));
  metrics_->OnEncode(shard.length, SecondsSince(encode_started));
  v1::PushResponse resp;
  // The turn ends after the first attempt, whatever came of it: a retry
  // (the server away) must not hold up the other shards.
  (void)turn.Wait(TurnWaitLimit());
  const auto started = SteadyClock::now();
  const auto push_once = [&] {
    grpc::Status once = SendPushOnce(shard, req, &resp);
    turn.Done();
    return once;
  };
  grpc::Status s = retry_.Run("Push shard " + std::to_string(shard.id), push_once,
                              /*pacer=*/nullptr, &step_interrupted_);
  if (!s.ok()) {
    return FromGrpcStatus(s).Annotate("Push step " + std::to_string(step) + " to shard " +
                                      std::to_string(shard.id) + " at " + shard.address);
  }
  shard.encoder->Commit();
  const v1::Payload& pushed = req.gradient();
  metrics_->OnPush(shard.id, pushed.data().size() + pushed.scales().size(), 4 * shard.length,
                   std::chrono::duration<double>(SteadyClock::now() - started).count());
  return Status::Ok();
}

Status WorkerImpl::PushShardInParts(Shard& shard, std::span<const float> grads, uint64_t step,
                                    SteadyClock::time_point deadline,
                                    GradientProgress& progress, EncodeStats* stats,
                                    UplinkTurn& turn, v1::PushRequest* out_req) {
  v1::PushRequest& req = *out_req;
  req.set_worker_id(worker_id_.load());
  req.set_ticket(ticket());
  req.set_shard_id(shard.id);
  req.set_step(step);
  SetPushHyper(shard.hyper, &req);
  v1::Payload& g = *req.mutable_gradient();
  LOCO_RETURN_IF_ERROR(shard.encoder->BeginEncode(static_cast<int64_t>(step), &g));
  *stats = EncodeStats{};
  const size_t part = PushPartElements(*shard.encoder, options_.push_chunk_bytes, shard.length, g);
  const auto started = SteadyClock::now();
  grpc::ClientContext ctx;
  // The stream stays open while the gradient is computed, which may take
  // longer than one RPC: it has what is left of the step, and at least
  // rpc_timeout_ms.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - SteadyClock::now());
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::max(left, std::chrono::milliseconds(options_.rpc_timeout_ms)));
  v1::PushResponse resp;
  PlacedPushStream stream(shard.channel, &ctx, req, &resp);
  bool streaming = true;
  size_t written_from = shard.length;  // [written_from, length) is written
  // Writes [to, written_from), the end first, a chunk's worth at a time.
  const auto write_down_to = [&](size_t to) {
    for (size_t end = written_from; streaming && end > to;) {
      const size_t from = end - to > part ? end - part : to;
      const size_t data_at = PayloadDataBytes(g, from), scales_at = PayloadScaleBytes(g, from);
      streaming = stream.Write(data_at, PayloadDataBytes(g, end) - data_at, scales_at,
                               PayloadScaleBytes(g, end) - scales_at);
      end = from;
    }
    written_from = to;
  };
  const Status encoded =
      EncodePartsAsFinal(shard, grads, step, part, progress, turn, &g, stats, write_down_to);
  if (!encoded.ok()) {
    ctx.TryCancel();
    (void)stream.Finish();
    return encoded;
  }
  (void)turn.Wait(TurnWaitLimit());
  write_down_to(0);
  turn.Done();
  grpc::Status s = stream.Finish();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // The server went away mid-stream: the whole request, encoded by now,
    // goes again as any push does.
    s = retry_.Run(
        "Push shard " + std::to_string(shard.id), [&] { return SendPushOnce(shard, req, &resp); },
        /*pacer=*/nullptr, &step_interrupted_);
  }
  if (!s.ok()) {
    return FromGrpcStatus(s).Annotate("Push step " + std::to_string(step) + " to shard " +
                                      std::to_string(shard.id) + " at " + shard.address);
  }
  shard.encoder->Commit();
  metrics_->OnPush(shard.id, g.data().size() + g.scales().size(), 4 * shard.length,
                   std::chrono::duration<double>(SteadyClock::now() - started).count());
  return Status::Ok();
}

Status WorkerImpl::EncodePartsAsFinal(Shard& shard, std::span<const float> grads,
                                      uint64_t step, size_t part, GradientProgress& progress,
                                      const UplinkTurn& turn, v1::Payload* gradient,
                                      EncodeStats* stats,
                                      const std::function<void(size_t)>& write_down_to) {
  const std::span<const float> slice = grads.subspan(shard.offset, shard.length);
  const size_t align = shard.encoder->part_alignment();
  size_t sent_from = shard.length;  // [sent_from, length) is encoded
  while (sent_from > 0) {
    const size_t want = std::min(part, sent_from);
    const std::optional<size_t> final_from =
        progress.WaitFinalBelow(shard.offset + sent_from - want + 1);
    if (!final_from) {
      return Aborted("the gradient of step " + std::to_string(step) + " was not computed");
    }
    const size_t local = std::max<size_t>(*final_from, shard.offset) - shard.offset;
    const size_t begin = (local + align - 1) / align * align;
    const auto encode_started = SteadyClock::now();
    LOCO_RETURN_IF_ERROR(shard.encoder->EncodeRange(slice, begin, sent_from, gradient, stats));
    metrics_->OnEncode(sent_from - begin, SecondsSince(encode_started));
    sent_from = begin;
    // Out of turn, the parts wait, encoded, while the later shards' pushes
    // have the link.
    if (turn.Ready()) write_down_to(sent_from);
  }
  return Status::Ok();
}

grpc::Status WorkerImpl::SendPushOnce(Shard& shard, const v1::PushRequest& req,
                                      v1::PushResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(RpcDeadline());
  if (options_.push_chunk_bytes == 0) return shard.stub->Push(&ctx, req, resp);
  return SendPushInChunks(shard.channel, &ctx, req, options_.push_chunk_bytes, resp);
}

Status WorkerImpl::SendPush(Shard& shard, const v1::PushRequest& req,
                            SteadyClock::time_point deadline) {
  v1::PushResponse resp;
  LogPacer away_log;  // one pace for all rounds while the server is away
  for (int round = 0;; ++round) {
    if (step_interrupted_) {
      return Aborted("Push step " + std::to_string(req.step()) + " again to shard " +
                     std::to_string(shard.id) + " at " + shard.address +
                     ": the step was interrupted");
    }
    const auto started = SteadyClock::now();
    grpc::Status s = retry_.Run(
        "Push again to shard " + std::to_string(shard.id),
        [&] { return SendPushOnce(shard, req, &resp); }, &away_log, &step_interrupted_);
    if (s.ok()) {
      // The bytes crossed the wire again; the fp32-equivalent data did not
      // grow (it is the same gradient), so only the wire counter moves.
      const v1::Payload& pushed = req.gradient();
      metrics_->OnPush(shard.id, pushed.data().size() + pushed.scales().size(), 0,
                       std::chrono::duration<double>(SteadyClock::now() - started).count());
      return Status::Ok();
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || SteadyClock::now() >= deadline) {
      const bool away = s.error_code() == grpc::StatusCode::UNAVAILABLE;
      return FromGrpcStatus(s).Annotate("Push step " + std::to_string(req.step()) +
                                        " again to shard " + std::to_string(shard.id) + " at " +
                                        shard.address + (away ? AwayUntilDeadline() : ""));
    }
    RetryPolicy::Pause(std::max(kMinAwayPause, retry_.Backoff(round)), &step_interrupted_);
  }
}

void WorkerImpl::WithdrawFromStep(Shard& shard, uint64_t step) {
  v1::PushRequest req;
  req.set_worker_id(worker_id_.load());
  req.set_shard_id(shard.id);
  req.set_step(step);
  req.set_ticket(ticket());
  req.set_withdraw(true);
  v1::PushResponse resp;
  const grpc::Status s = retry_.Run(
      "Withdraw from step " + std::to_string(step),
      [&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(RpcDeadline());
        return shard.stub->Push(&ctx, req, &resp);
      },
      nullptr, &step_interrupted_);
  if (s.ok()) {
    LOG_WARN("step " << step << ": withdrew from shard " << shard.id
                     << " after its refusal; the other workers' step goes on without this one");
  } else {
    LOG_WARN("step " << step << ": could not withdraw from shard " << shard.id << " at "
                     << shard.address << " (" << FromGrpcStatus(s).ToString()
                     << "); the other workers wait for this one's push there");
  }
}

std::string WorkerImpl::AwayUntilDeadline() const {
  return " (unreachable until the step's deadline, step_timeout_ms = " +
         std::to_string(options_.step_timeout_ms) + ")";
}

std::string WorkerImpl::AwaitedBy(Shard& shard) const {
  v1::ShardStatusRequest req;
  req.set_shard_id(shard.id);
  v1::ShardStatusResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(RpcDeadline());
  if (!shard.stub->ShardStatus(&ctx, req, &resp).ok() || resp.awaiting().empty()) return "";
  std::string ids;
  for (uint64_t id : resp.awaiting()) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  return "; it still waits for the push of worker(s) " + ids +
         " (members that have not pushed this step: stalled, or never stepping)";
}

void WorkerImpl::PushAndPull(Shard& shard, std::span<const float> grads, uint64_t step,
                             SteadyClock::time_point deadline, std::span<float> params,
                             GradientProgress& progress, UplinkTurn& turn, StepAbort& abort,
                             EncodeStats* stats, PullOutcome* pulled, Status* push_status,
                             Status* pull_status) {
  v1::PushRequest& req = shard.push;
  // The step's pull goes first: waiting on the server when the step
  // begins, it gets the answer in parts while the step computes them. Had
  // it been sent after this push, the server could begin the step (this
  // push being the last) before it saw the pull.
  std::unique_ptr<PullStreamCall> early_pull;
  if (options_.pull_parts) early_pull = OpenStepPull(shard, step + 1, deadline);
  const StepAbortScope early_pull_abort(&abort, early_pull ? early_pull->context() : nullptr);
  *push_status = PushWhenFinal(shard, grads, step, deadline, progress, turn, stats);
  turn.Done();  // on every path: the earlier shards must not wait for this pull
  if (push_status->code() == StatusCode::kAborted) return;
  // The gradient's norm (for the metrics) of this shard's range, taken here
  // while the step waits for the other workers, not after the last pull,
  // where it would delay the next step. A device gradient's encoder
  // measured it (the host cannot read device memory).
  if (options_.gradient_device < 0 && !stats->grad_sq_norm) {
    stats->grad_sq_norm = FiniteSquaredNorm(grads.subspan(shard.offset, shard.length));
  }
  bool send_again = false;
  for (int round = 0; round < kMaxRepushRounds; ++round) {
    if (send_again || push_status->code() == StatusCode::kUnavailable) {
      // The same bytes: the server acknowledges a duplicate once, and the
      // LoCo error state advances once (Commit is a no-op the second time).
      *push_status = SendPush(shard, req, deadline);
      if (push_status->ok()) shard.encoder->Commit();
    }
    if (!push_status->ok()) {
      if (EndsTheStep(*push_status)) {
        abort.Abort(push_status->Annotate("shard " + std::to_string(shard.id)));
        // The server answered and refused what was sent: it still counts
        // this worker in the step, and the others would wait for it.
        if (push_status->code() == StatusCode::kInvalidArgument) WithdrawFromStep(shard, step);
      }
      return;
    }
    *pull_status = PullShard(shard, step + 1, /*want_full=*/false, deadline, params, pulled,
                             /*repush=*/true, [&] { progress.WaitDone(); },
                             round == 0 ? early_pull.get() : nullptr, &abort);
    if (pull_status->code() != StatusCode::kAborted || abort.aborted()) return;
    LOG_WARN(pull_status->message());
    send_again = true;
  }
}

Status WorkerImpl::PushWhenFinal(Shard& shard, std::span<const float> grads, uint64_t step,
                                 SteadyClock::time_point deadline, GradientProgress& progress,
                                 UplinkTurn& turn, EncodeStats* stats) {
  // Some of the shard is final; all of it when this returns a value <= offset.
  const std::optional<size_t> final_from =
      progress.WaitFinalBelow(shard.offset + shard.length);
  const bool in_parts = options_.push_parts && options_.push_chunk_bytes > 0 &&
                        shard.encoder->part_alignment() > 0 && final_from &&
                        *final_from > shard.offset;
  if (in_parts) {
    return PushShardInParts(shard, grads, step, deadline, progress, stats, turn, &shard.push);
  }
  if (!final_from || !progress.WaitFinalBelow(shard.offset + 1)) {
    return Aborted("the gradient of step " + std::to_string(step) + " was not computed");
  }
  return PushShard(shard, grads, step, stats, turn, &shard.push);
}

Status WorkerImpl::PullShard(Shard& shard, uint64_t min_version, bool want_full,
                             SteadyClock::time_point deadline, std::span<float> params,
                             PullOutcome* out, bool repush,
                             const std::function<void()>& before_apply, PullStreamCall* stream,
                             StepAbort* abort) {
  const auto started = SteadyClock::now();
  const auto aborted = [&] {
    return Aborted("the step was abandoned: " + abort->reason().ToString() +
                   "; the pull of shard " + std::to_string(shard.id) + " was cancelled");
  };
  if (stream != nullptr) {
    const Status read = stream->ReadAll(shard.length, &shard.parts);
    if (read.ok() && shard.parts.header().version() >= min_version) {
      return ApplyAnswer(shard, shard.parts.view(), shard.parts.header().version(), started,
                         before_apply, params, out);
    }
    // No answer at min_version: the plain pulls below find out why (the
    // server away, the wait over) and act on it as they always do.
  }
  LogPacer away_log;  // one pace for all rounds while the server is away
  for (int away_rounds = 0;;) {
    if (abort != nullptr && abort->aborted()) return aborted();
    v1::PullRequest req = StepPullRequest(shard, min_version, want_full, deadline);
    PulledResponse& answer = shard.pulled;
    grpc::ByteBuffer bytes;
    bool away = false;  // an attempt found the server unreachable
    const auto pull_once = [&] {
      grpc::ClientContext ctx;
      const StepAbortScope cancelled_with_the_step(abort, &ctx);
      // Once the server was away, ask without waiting: a restarted server
      // never reaches min_version if our push died with its predecessor.
      if (away && repush) req.set_wait_ms(0);
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(req.wait_ms() + options_.rpc_timeout_ms));
      grpc::Status r = shard.puller->Pull(&ctx, req, &bytes);
      if (r.error_code() == grpc::StatusCode::UNAVAILABLE) away = true;
      return r;
    };
    grpc::Status s = retry_.Run("Pull shard " + std::to_string(shard.id), pull_once, &away_log,
                                &step_interrupted_);
    if (abort != nullptr && abort->aborted()) return aborted();
    if (s.ok()) {
      Status read = answer.Read(bytes);
      if (!read.ok()) {
        return read.Annotate("Pull shard " + std::to_string(shard.id) + " at " + shard.address);
      }
    }
    const v1::PullResponse& resp = answer.header();
    const bool not_yet = (s.ok() && resp.version() < min_version) ||
                         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    const bool unreachable = s.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (repush && away && (not_yet || unreachable)) {
      return Aborted("shard " + std::to_string(shard.id) + " at " + shard.address +
                     " was unreachable and has not reached version " +
                     std::to_string(min_version) + "; the push may have been lost with the "
                     "server: pushing again");
    }
    if (unreachable && SteadyClock::now() < deadline) {
      // The server is away (restarting): keep trying until the step deadline.
      RetryPolicy::Pause(std::max(kMinAwayPause, retry_.Backoff(away_rounds++)),
                         &step_interrupted_);
      continue;
    }
    if (not_yet) {
      if (SteadyClock::now() < deadline) continue;
      return DeadlineExceeded("shard " + std::to_string(shard.id) + " at " + shard.address +
                              " did not reach version " + std::to_string(min_version) +
                              " within step_timeout_ms = " +
                              std::to_string(options_.step_timeout_ms) + AwaitedBy(shard));
    }
    if (!s.ok()) {
      return FromGrpcStatus(s).Annotate(
          "Pull shard " + std::to_string(shard.id) + " at " + shard.address +
          (unreachable ? AwayUntilDeadline() : ""));
    }
    const Status applied =
        ApplyAnswer(shard, answer.view(), resp.version(), started, before_apply, params, out);
    answer.Release();  // gRPC's receive buffers go back before the next step
    return applied;
  }
}

v1::PullRequest WorkerImpl::StepPullRequest(const Shard& shard, uint64_t min_version,
                                            bool want_full,
                                            SteadyClock::time_point deadline) const {
  const int64_t left_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now())
          .count();
  v1::PullRequest req;
  req.set_worker_id(worker_id_.load());
  req.set_ticket(ticket());
  req.set_shard_id(shard.id);
  req.set_min_version(min_version);
  req.set_wait_ms(static_cast<uint32_t>(std::clamp<int64_t>(left_ms, 0, options_.pull_wait_ms)));
  req.set_have_version(shard.version);
  req.set_have_any(shard.have);
  req.set_want_full(want_full || !shard.have);
  return req;
}

std::unique_ptr<PullStreamCall> WorkerImpl::OpenStepPull(Shard& shard, uint64_t min_version,
                                                         SteadyClock::time_point deadline) {
  const v1::PullRequest req = StepPullRequest(shard, min_version, /*want_full=*/false, deadline);
  return std::make_unique<PullStreamCall>(
      shard.channel, req,
      std::chrono::system_clock::now() +
          std::chrono::milliseconds(req.wait_ms() + options_.rpc_timeout_ms));
}

Status WorkerImpl::ApplyAnswer(Shard& shard, const PulledParamsView& answer, uint64_t version,
                               SteadyClock::time_point started,
                               const std::function<void()>& before_apply, std::span<float> params,
                               PullOutcome* out) {
  if (before_apply) {
    // The time spent waiting for the computation is not the pull's.
    const auto waited_from = SteadyClock::now();
    before_apply();
    started += SteadyClock::now() - waited_from;
  }
  const std::span<float> slice = params.subspan(shard.offset, shard.length);
  const auto decode_started = SteadyClock::now();
  StatusOr<size_t> wire = ApplyPulledParams(answer, shard.offset, shard.have, shard.version, slice);
  if (!wire.ok()) return wire.status().Annotate("Pull shard " + std::to_string(shard.id));
  metrics_->OnDecode(shard.length, SecondsSince(decode_started));
  shard.version = version;
  shard.have = true;
  out->wire_bytes += *wire;
  out->fp32_bytes += 4 * shard.length;
  metrics_->OnPull(shard.id, *wire, 4 * shard.length,
                   std::chrono::duration<double>(SteadyClock::now() - started).count());
  return Status::Ok();
}

}  // namespace loco
