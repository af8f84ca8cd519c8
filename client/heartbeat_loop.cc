#include "client/heartbeat_loop.h"

#include <chrono>
#include <optional>
#include <string>

#include "common/log.h"
#include "common/log_pacer.h"
#include "rpc/incarnation_trailer.h"

namespace loco {

HeartbeatLoop::HeartbeatLoop(v1::Coordinator::Stub* stub, uint64_t worker_id, std::string ticket,
                             int interval_ms, int rpc_timeout_ms, HeartbeatCallbacks callbacks)
    : stub_(stub),
      worker_id_(worker_id),
      ticket_(std::move(ticket)),
      interval_ms_(interval_ms),
      rpc_timeout_ms_(rpc_timeout_ms),
      callbacks_(std::move(callbacks)) {}

HeartbeatLoop::~HeartbeatLoop() { Stop(); }

void HeartbeatLoop::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Run(); });
}

void HeartbeatLoop::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

grpc::Status HeartbeatLoop::BeatOnce() {
  v1::HeartbeatRequest req;
  req.set_worker_id(worker_id_);
  req.set_ticket(ticket_);
  req.set_step(callbacks_.current_step ? callbacks_.current_step() : 0);
  v1::HeartbeatResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(rpc_timeout_ms_));
  grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
  if (s.ok()) {
    // An answer of an older coordinator incarnation than one seen before
    // (a replaced coordinator, a delayed reply) says nothing current.
    uint64_t newest = newest_incarnation_.load();
    while (resp.incarnation() > newest &&
           !newest_incarnation_.compare_exchange_weak(newest, resp.incarnation())) {
    }
    if (resp.incarnation() < newest) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "a heartbeat answer of an older coordinator incarnation");
    }
    if (callbacks_.on_update) callbacks_.on_update(resp);
  } else if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    // Only the coordinator that admitted this worker, or a newer one, may
    // expire it: a NOT_FOUND of an older incarnation is a stale process
    // that never knew the worker (rpc/incarnation_trailer.h).
    const std::optional<uint64_t> from = IncarnationTrailer(ctx);
    const uint64_t newest = newest_incarnation_.load();
    if (from.has_value() && *from < newest) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "a NOT_FOUND of coordinator incarnation " + std::to_string(*from) +
                              ", older than " + std::to_string(newest) +
                              " which answered before: ignored");
    }
    OnExpired(s);
  }
  return s;
}

void HeartbeatLoop::OnExpired(const grpc::Status& why) {
  if (callbacks_.has_left && callbacks_.has_left()) {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;  // the leave was answered: nothing more to beat for
    return;
  }
  if (expired_.exchange(true)) return;
  LOG_ERROR("heartbeat: the coordinator no longer knows worker " << worker_id_ << " ("
            << why.error_message() << "); the worker has expired and must join again");
  if (callbacks_.on_expired) callbacks_.on_expired();
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void HeartbeatLoop::Run() {
  int consecutive_failures = 0;
  LogPacer failure_log;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::milliseconds(interval_ms_), [this] { return stop_; });
      if (stop_) return;
    }
    if (callbacks_.has_left && callbacks_.has_left()) return;
    const grpc::Status s = BeatOnce();
    if (s.ok()) {
      if (consecutive_failures > 0) LOG_INFO("heartbeat: coordinator reachable again");
      consecutive_failures = 0;
      continue;
    }
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) return;
    // Paced, to keep a long outage readable.
    ++consecutive_failures;
    if (failure_log.ShouldLog(std::chrono::steady_clock::now())) {
      LOG_WARN("heartbeat failed (" << consecutive_failures << " in a row): "
               << s.error_message());
    }
  }
}

}  // namespace loco
