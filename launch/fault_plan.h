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
//   kill-coordinator@STEP[:DELAY_MS]
//                          SIGKILL the coordinator; after DELAY_MS (default
//                          kDefaultCoordinatorDownMs) the launcher restarts
//                          it with the same argv on the same port, and the
//                          cluster recovers from the servers' and workers'
//                          re-registration
//
// Several faults are separated by commas (or given as repeated --fault).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loco {

// How long a killed coordinator stays down when kill-coordinator names no
// DELAY_MS; the most it may name is kMaxCoordinatorDownMs.
inline constexpr int64_t kDefaultCoordinatorDownMs = 1000;
inline constexpr int64_t kMaxCoordinatorDownMs = 600000;

struct Fault {
  enum class Kind { kKillWorker, kKillServer, kJoinWorker, kKillCoordinator };
  Kind kind = Kind::kKillWorker;
  uint64_t step = 0;
  int target = -1;         // worker index or shard id; -1 = the default
  int64_t down_ms = -1;    // kill-coordinator's DELAY_MS; -1 = the default
  bool fired = false;

  // kill-coordinator: how long the coordinator stays dead before its restart.
  int64_t coordinator_down_ms() const {
    return down_ms >= 0 ? down_ms : kDefaultCoordinatorDownMs;
  }

  std::string ToString() const;  // the spec it was parsed from, normalised
};

// Parses a comma-separated list; an empty spec is an empty plan.
// InvalidArgument names the bad entry and the accepted forms.
StatusOr<std::vector<Fault>> ParseFaults(const std::string& spec);

// Whether `faults` can happen in a run of `servers` shards, `workers`
// workers (join-worker faults add one each, indexed after them) and
// `steps` steps (0 = not known before the run: unchecked). InvalidArgument
// naming the fault and the run's bound for a shard or worker index that
// does not exist or a step the run never reaches (a fault that silently
// never fires would read as a run that survived it).
[[nodiscard]] Status CheckFaultsFit(const std::vector<Fault>& faults, int servers, int workers,
                                    uint64_t steps);

}  // namespace loco
