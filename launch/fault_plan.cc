#include "launch/fault_plan.h"

#include <cstdlib>
#include <sstream>

namespace loco {
namespace {

const char* KindName(Fault::Kind k) {
  switch (k) {
    case Fault::Kind::kKillWorker: return "kill-worker";
    case Fault::Kind::kKillServer: return "kill-server";
    case Fault::Kind::kJoinWorker: return "join-worker";
    case Fault::Kind::kKillCoordinator: return "kill-coordinator";
  }
  return "?";
}

bool ParseUint(const std::string& s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 12) {
    return false;
  }
  *out = std::strtoull(s.c_str(), nullptr, 10);
  return *out <= max;
}

Status Bad(const std::string& entry, const std::string& why) {
  return InvalidArgument("invalid fault '" + entry + "': " + why +
                         "; expected kill-worker@STEP[:INDEX], kill-server@STEP[:SHARD], "
                         "join-worker@STEP or kill-coordinator@STEP[:DELAY_MS], e.g. "
                         "kill-worker@50,kill-server@120:1,kill-coordinator@200:2000");
}

}  // namespace

std::string Fault::ToString() const {
  std::string s = std::string(KindName(kind)) + "@" + std::to_string(step);
  if (target >= 0) s += ":" + std::to_string(target);
  if (down_ms >= 0) s += ":" + std::to_string(down_ms);
  return s;
}

StatusOr<std::vector<Fault>> ParseFaults(const std::string& spec) {
  std::vector<Fault> faults;
  std::stringstream in(spec);
  for (std::string entry; std::getline(in, entry, ',');) {
    if (entry.empty()) continue;
    const size_t at = entry.find('@');
    if (at == std::string::npos) return Bad(entry, "no @STEP");
    Fault f;
    const std::string kind = entry.substr(0, at);
    if (kind == "kill-worker") {
      f.kind = Fault::Kind::kKillWorker;
    } else if (kind == "kill-server") {
      f.kind = Fault::Kind::kKillServer;
    } else if (kind == "join-worker") {
      f.kind = Fault::Kind::kJoinWorker;
    } else if (kind == "kill-coordinator") {
      f.kind = Fault::Kind::kKillCoordinator;
    } else {
      return Bad(entry, "unknown kind '" + kind + "'");
    }
    std::string rest = entry.substr(at + 1), target;
    bool has_target = false;
    if (const size_t colon = rest.find(':'); colon != std::string::npos) {
      has_target = true;
      target = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
      if (f.kind == Fault::Kind::kJoinWorker) return Bad(entry, "join-worker takes no target");
    }
    if (!ParseUint(rest, uint64_t{1} << 40, &f.step)) return Bad(entry, "STEP is not a number");
    if (has_target && f.kind == Fault::Kind::kKillCoordinator) {
      uint64_t ms = 0;
      if (!ParseUint(target, kMaxCoordinatorDownMs, &ms)) {
        return Bad(entry, "DELAY_MS is not a number of milliseconds <= " +
                              std::to_string(kMaxCoordinatorDownMs));
      }
      f.down_ms = static_cast<int64_t>(ms);
    } else if (has_target) {
      uint64_t t = 0;
      if (!ParseUint(target, 65535, &t)) return Bad(entry, "the target is not a number <= 65535");
      f.target = static_cast<int>(t);
    }
    faults.push_back(f);
  }
  return faults;
}

Status CheckFaultsFit(const std::vector<Fault>& faults, int servers, int workers, uint64_t steps) {
  int all_workers = workers;
  for (const Fault& f : faults) all_workers += f.kind == Fault::Kind::kJoinWorker ? 1 : 0;
  for (const Fault& f : faults) {
    const std::string what = "fault " + f.ToString();
    if (steps > 0 && f.step > steps) {
      return InvalidArgument(what + " never fires: the run has " + std::to_string(steps) +
                             " steps (--steps); give a STEP of at most " + std::to_string(steps));
    }
    const bool server = f.kind == Fault::Kind::kKillServer;
    if (!server && f.kind != Fault::Kind::kKillWorker) continue;
    const int count = server ? servers : all_workers;
    if (f.target < count) continue;
    return InvalidArgument(what + " names " + (server ? "shard " : "worker ") +
                           std::to_string(f.target) + ", but the run has " + std::to_string(count) +
                           (server ? " server(s) (--servers): SHARD"
                                   : " worker(s) (--workers and join-worker faults): INDEX") +
                           " is in [0, " + std::to_string(count - 1) + "]");
  }
  return Status::Ok();
}

}  // namespace loco
