#include "client/channel_poller.h"

#include <algorithm>

namespace loco {

ChannelPoller::ChannelPoller(std::chrono::milliseconds check_every)
    : check_every_(check_every), thread_([this] { Run(); }) {}

ChannelPoller::~ChannelPoller() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  queue_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue_.Next(&tag, &ok)) {
  }
}

void ChannelPoller::Watch(const std::shared_ptr<grpc::Channel>& channel) {
  std::lock_guard<std::mutex> l(mu_);
  channels_.push_back(channel);
}

bool ChannelPoller::AnyReconnecting() {
  std::lock_guard<std::mutex> l(mu_);
  bool any = false;
  channels_.erase(std::remove_if(channels_.begin(), channels_.end(),
                                 [&](const std::weak_ptr<grpc::Channel>& weak) {
                                   const std::shared_ptr<grpc::Channel> channel = weak.lock();
                                   if (!channel) return true;
                                   const grpc_connectivity_state state =
                                       channel->GetState(/*try_to_connect=*/false);
                                   any = any || state == GRPC_CHANNEL_CONNECTING ||
                                         state == GRPC_CHANNEL_TRANSIENT_FAILURE;
                                   return false;
                                 }),
                  channels_.end());
  return any;
}

void ChannelPoller::Run() {
  for (;;) {
    if (AnyReconnecting()) {
      // Polls for check_every_: the queue never gets work.
      void* tag = nullptr;
      bool ok = false;
      (void)queue_.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + check_every_);
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
      continue;
    }
    std::unique_lock<std::mutex> l(mu_);
    if (cv_.wait_for(l, check_every_, [this] { return stop_; })) return;
  }
}

}  // namespace loco
