// RunPlanCommand: loco-plan's whole command line, callable in-process (the
// program's main is one call to it; tests call it directly).
//
//   --mode=predict (default): reads --calibration, predicts the step of the
//     cluster the flags describe (--shards 0: at the recommended count) and
//     prints it, text or --format=json.
//   --mode=calibrate: fits the constants to --measured runs and writes
//     them to --write-calibration.
//
// Exit codes: 0 done; 2 a flag is invalid (the message names it and what
// would be valid); 1 a file cannot be read or written, or holds bad data.
// Not thread-safe (it reads the environment for flags not given).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace loco::plan {

// `args` without the program name.
int RunPlanCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace loco::plan
