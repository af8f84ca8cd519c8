// ChannelPoller: a thread that polls gRPC's I/O while one of the channels
// it watches is connecting or in transient failure, so that client
// channels reconnect as soon as a restarted peer is back.
//
// Why: gRPC completes a channel's connection attempt (TCP connect, the
// HTTP/2 handshake) only while some thread of the process polls. A
// process without a gRPC server, as loco-worker and the Python package
// are, polls only while one of its calls is in flight, and a call to a
// channel in transient failure fails at once, without waiting. Between
// such calls nothing polls but gRPC's backup poller, every 5 s: measured,
// a client-only process took 6-9 s to reach a coordinator restarted 1 s
// after a kill -9, against 0.2-0.6 s with this thread
// (`ctest -R ChannelPoller`). Processes with a gRPC server have its
// threads polling and do not need one.
//
// While every watched channel is ready or idle the thread only looks at
// their states every `check_every` (no polling: a second poller would
// take completions from the calls' own threads and cost a thread switch
// each).
//
// Thread safety: Watch may be called from any thread. Construct and
// destroy on one thread; the destructor returns within about
// `check_every`.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/completion_queue.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace loco {

class ChannelPoller {
 public:
  explicit ChannelPoller(std::chrono::milliseconds check_every = std::chrono::milliseconds(50));
  ~ChannelPoller();
  ChannelPoller(const ChannelPoller&) = delete;
  ChannelPoller& operator=(const ChannelPoller&) = delete;

  // Watches `channel` for as long as it lives (held weakly).
  void Watch(const std::shared_ptr<grpc::Channel>& channel);

 private:
  void Run();
  // True when a watched channel is connecting or in transient failure;
  // forgets the channels that are gone.
  bool AnyReconnecting();

  const std::chrono::milliseconds check_every_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::weak_ptr<grpc::Channel>> channels_;
  // Never gets work: a thread waiting in its AsyncNext() is what polls.
  grpc::CompletionQueue queue_;
  std::thread thread_;
};

}  // namespace loco
