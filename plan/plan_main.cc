// loco-plan: predicts a LoCo-PS cluster's step time, wire bytes and server
// resources from a calibrated cost model, and recommends a shard count
// (README, "Planning a cluster"; plan/plan_command.h).
#include <iostream>
#include <string>
#include <vector>

#include "plan/plan_command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return loco::plan::RunPlanCommand(args, std::cout, std::cerr);
}
