// SetReconnectBackoff (rpc/reconnect_backoff.h): quick redials, but every
// connection attempt keeps gRPC's own minimum connect timeout. The redial
// speed itself is shown with real processes by
// CoordinatorRestart.ServersDialARestartedCoordinatorWithinASecondOfItsReturn.
#include "rpc/reconnect_backoff.h"

#include <grpc/grpc.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace loco {
namespace {

std::map<std::string, int> IntArgs(const grpc::ChannelArguments& args) {
  grpc_channel_args c_args;
  args.SetChannelArgs(&c_args);
  std::map<std::string, int> out;
  for (size_t i = 0; i < c_args.num_args; ++i) {
    if (c_args.args[i].type == GRPC_ARG_INTEGER) {
      out[c_args.args[i].key] = c_args.args[i].value.integer;
    }
  }
  return out;
}

TEST(ReconnectBackoff, RedialsSoonButGivesEachAttemptGrpcsConnectTimeout) {
  grpc::ChannelArguments args;
  SetReconnectBackoff(&args, 1000);
  const std::map<std::string, int> set = IntArgs(args);
  EXPECT_EQ(set.at(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS), 100);
  EXPECT_EQ(set.at(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), 1000);
  // gRPC takes this as the shortest time one attempt may take to connect,
  // not as a spacing: below gRPC's default (20 s) a slow handshake on a
  // loaded machine is cut off again and again.
  EXPECT_GE(set.at(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS), 20000);
}

TEST(ReconnectBackoff, TheCapIsNeverBelowTheFirstBackoff) {
  grpc::ChannelArguments args;
  SetReconnectBackoff(&args, 10);
  EXPECT_EQ(IntArgs(args).at(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), 100);
}

}  // namespace
}  // namespace loco
