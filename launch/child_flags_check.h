// CheckChildFlags: asks a program whether it takes its flags before the
// cluster starts, so that a flag a child would refuse (a typo in
// --worker-args, an option its model ignores) is a usage error of
// loco-launch, named at once, instead of a lost worker after the
// coordinator and the servers have started.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "launch/launch_options.h"

namespace loco {

// Runs `argv` with --check-flags appended (loco-worker and loco-server
// then validate their flags and the files those name, and exit: 0, or 2
// with the reason on stderr, which goes to `log_path`) and waits for it, at
// most `timeout_ms`. InvalidArgument saying `whose` flags were refused and
// the program's reason when it exits 2; Internal when it cannot be started,
// ends otherwise or runs past the timeout (it is then killed).
[[nodiscard]] Status CheckChildFlags(const std::string& whose, std::vector<std::string> argv,
                                     const std::string& log_path, int timeout_ms);

// Would the servers and the workers of a launch of `options` take their
// flags (child_argv.h's, with --server-args and --worker-args)? Asked
// before anything of the run exists: a well-formed address stands in for
// the coordinator, which does not run yet, and the children's answers are
// logged in a temporary folder that is removed afterwards, so that a
// refused launch leaves no folder behind (options.log_dir is not used).
// CheckChildFlags' statuses, for the servers first, each program given at
// most options.startup_timeout_s.
[[nodiscard]] Status PreflightChildFlags(const LaunchOptions& options);

}  // namespace loco
