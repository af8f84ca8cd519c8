// ChannelPoller: a thread that keeps gRPC's I/O polled for the life of the
// object, so that client channels reconnect as soon as a restarted peer is
// back.
//
// Why: gRPC completes a channel's connection attempt (TCP connect, the
// HTTP/2 handshake) only while some thread of the process polls. A
// process without a gRPC server, as loco-worker and the Python package
// are, polls only while one of its calls is in flight, and a call to a
// channel in transient failure fails at once, without waiting. Between
// such calls nothing polls but gRPC's backup poller, every 5 s: measured,
// a client-only process took 6 s to reach a coordinator restarted 1 s
// after a kill -9, against 0.2-0.6 s with this thread
// (`ctest -R ChannelPoller`). Processes with a gRPC server have its
// threads polling and do not need one.
//
// Thread safety: construct and destroy on one thread; nothing else to
// call. The destructor returns once the thread has stopped (promptly: it
// shuts the idle queue down).
#pragma once

#include <grpcpp/completion_queue.h>

#include <thread>

namespace loco {

class ChannelPoller {
 public:
  ChannelPoller();
  ~ChannelPoller();
  ChannelPoller(const ChannelPoller&) = delete;
  ChannelPoller& operator=(const ChannelPoller&) = delete;

 private:
  // Never gets work: a thread blocked in its Next() is what polls.
  grpc::CompletionQueue queue_;
  std::thread thread_;
};

}  // namespace loco
