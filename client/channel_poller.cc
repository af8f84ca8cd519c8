#include "client/channel_poller.h"

namespace loco {

ChannelPoller::ChannelPoller()
    : thread_([this] {
        void* tag = nullptr;
        bool ok = false;
        while (queue_.Next(&tag, &ok)) {
        }
      }) {}

ChannelPoller::~ChannelPoller() {
  queue_.Shutdown();
  thread_.join();
}

}  // namespace loco
