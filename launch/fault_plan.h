// Fault scenarios for loco-launch: what to break, and when, so that a user
// can watch the cluster recover locally and read what was lost in the
// summary.
//
//   kill-worker@STEP[:I]   SIGKILL worker I (default: the newest running one)
//                          once any worker reports step >= STEP
//   kill-server@STEP[:K]   SIGKILL the server of shard K (default 0); the
//                          launcher restarts it and it resumes from its
//                          checkpoint
//   join-worker@STEP       one more worker joins once the cluster reaches
//                          STEP (its process starts at launch and waits,
//                          loco-worker --join-at-step, so that it is ready)
//
// Several faults are separated by commas (or given as repeated --fault).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

struct Fault {
  enum class Kind { kKillWorker, kKillServer, kJoinWorker };
  Kind kind = Kind::kKillWorker;
  uint64_t step = 0;
  int target = -1;  // worker index or shard id; -1 = the default
  bool fired = false;

  std::string ToString() const;  // the spec it was parsed from, normalised
};

// Parses a comma-separated list; an empty spec is an empty plan.
// InvalidArgument names the bad entry and the accepted forms.
StatusOr<std::vector<Fault>> ParseFaults(const std::string& spec);

}  // namespace loco
