// ProgramDir: the folder of the running program's executable, for finding
// what ships beside it (sibling programs in bin/, data in ../share/).
#pragma once

#include <string>

namespace loco {

// The directory of /proc/self/exe, without a trailing slash; "." when the
// link cannot be read (paths built on it then resolve against the working
// directory). Thread-safe.
std::string ProgramDir();

}  // namespace loco
