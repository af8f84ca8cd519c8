// Require: how a fuzz target states an invariant. A violated one is a
// finding: the target prints which, under its own program name, and
// aborts, so that libFuzzer stops and saves the input that broke it.
#pragma once

#include <errno.h>  // program_invocation_short_name (glibc)

#include <cstdio>
#include <cstdlib>

namespace loco::fuzz {

inline void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "%s invariant violated: %s\n", program_invocation_short_name, what);
    std::abort();
  }
}

}  // namespace loco::fuzz
