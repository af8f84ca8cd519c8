// CheckChildFlags: asks a program whether it takes its flags before the
// cluster starts, so that a flag a child would refuse (a typo in
// --worker-args, an option its model ignores) is a usage error of
// loco-launch, named at once, instead of a lost worker after the
// coordinator and the servers have started.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

// Runs `argv` with --check-flags appended (loco-worker and loco-server
// then validate their flags and the files those name, and exit: 0, or 2
// with the reason on stderr, which goes to `log_path`) and waits for it, at
// most `timeout_ms`. InvalidArgument saying `whose` flags were refused and
// the program's reason when it exits 2; Internal when it cannot be started,
// ends otherwise or runs past the timeout (it is then killed).
[[nodiscard]] Status CheckChildFlags(const std::string& whose, std::vector<std::string> argv,
                                     const std::string& log_path, int timeout_ms);

}  // namespace loco
