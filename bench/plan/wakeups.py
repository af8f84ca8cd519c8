#!/usr/bin/python3
"""How often a server's transport wakes to read, at a few link rates.

Runs bench/e2e's cluster (one server) for each configuration twice: once
as measured, for the server's CPU seconds per step, and once with perf
counting every process's recvmsg and epoll_wait calls while it trains
(perf record of the syscall tracepoints, system wide, which slows the run:
its CPU figure is not used). Prints, per configuration, the server's
reads per step and the bytes it received per read: the explanation of
loco-plan's server CPU misses at slow links (bench/plan/README.md,
"Why fp32 on a slow link costs the server more CPU").

Needs root (network namespaces, tc) and perf; exits 77 without them.
    /usr/bin/python3 bench/plan/wakeups.py [--steps 20]
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench", "e2e"))
import measure  # noqa: E402
import netns  # noqa: E402

# The 1.9M model, one server, batch 64 per worker; the first is
# measure.py's configuration that the planner misses most.
CONFIGS = [
    measure.Config("fp32-ps", [1024, 1024], 2, 1, 200, "fp32", 4, "fp32", 8, 128),
    measure.Config("fp32-ps", [1024, 1024], 2, 1, 1000, "fp32", 4, "fp32", 8, 128),
    measure.Config("loco4-delta", [1024, 1024], 2, 1, 200, "loco", 4, "delta", 8, 128),
]
EVENTS = "syscalls:sys_enter_recvmsg,syscalls:sys_enter_epoll_wait"


def syscalls_by_process(script_text):
    """{(main thread's name, pid): {event: count}} from `perf script -F
    pid,tid,comm,event` lines ("name pid/tid syscalls:sys_enter_x:"); a
    process whose main thread made no call is named "?"."""
    names, counts = {}, {}
    for line in script_text.splitlines():
        f = line.split()
        if len(f) < 3 or "/" not in f[-2]:
            continue
        pid, tid = f[-2].split("/")
        if pid == tid:
            names[pid] = f[0]
        event = f[-1].rstrip(":").split(":")[-1]
        per_event = counts.setdefault(pid, {})
        per_event[event] = per_event.get(event, 0) + 1
    return {(names.get(pid, "?"), pid): c for pid, c in counts.items()}


def server_calls(by_process):
    """(reads, epoll waits) of the process with the most reads that is no
    worker, coordinator, script or ip (the server)."""
    return max((v.get("sys_enter_recvmsg", 0), v.get("sys_enter_epoll_wait", 0))
               for (name, _), v in by_process.items()
               if not name.startswith(("loco-worker", "loco-coordinato", "python", "ip")))


def traced(topo, bins, work, c, steps):
    """One run with perf recording the syscalls from steady training to the
    end; returns (the server's reads, epoll waits, bytes it received)."""
    data = os.path.join(work, "perf.data")
    state = {}

    def start():
        state["before"] = topo.counters()
        state["perf"] = subprocess.Popen(["perf", "record", "-q", "-a", "-e", EVENTS, "-o", data],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        measure.run_config(topo, bins, work, c, steps, on_training=start)
    finally:
        if "perf" in state:
            state["perf"].send_signal(signal.SIGINT)
            state["perf"].wait(timeout=60)
    after = topo.counters()
    received = sum(after[i][0] - state["before"][i][0] for i in after)
    script = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,comm,event"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            timeout=120, check=True).stdout
    reads, waits = server_calls(syscalls_by_process(script))
    return reads, waits, received


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("perf"):
        print("wakeups: SKIPPED: needs root (network namespaces, tc) and perf")
        return 77
    if not 8 <= a.steps <= 200:
        ap.error(f"--steps must be in [8, 200], got {a.steps}")
    bins = {b: os.path.join(a.build_dir, "bin", b)
            for b in ("loco-coordinator", "loco-server", "loco-worker")}
    prefix = "lpwake"
    netns.cleanup(prefix)
    print("| configuration | link | server CPU s per step | server reads per step "
          "| epoll waits per step | KB received per read |")
    print("| --- | --- | --- | --- | --- | --- |")
    topo = None
    try:
        for c in CONFIGS:
            topo = measure.topology_for(topo, prefix, c.workers)
            with tempfile.TemporaryDirectory(prefix="wakeups.") as work:
                row = measure.run_config(topo, bins, work, c, a.steps)
                reads, waits, received = traced(topo, bins, work, c, a.steps)
            window = a.steps - 3  # perf starts after the third step event
            print(f"| {c.name}, W={c.workers}, S={c.servers} | {c.rate} Mbit/s "
                  f"| {row['server_cpu_s_per_step']} "
                  f"| {reads / window:.0f} | {waits / window:.0f} "
                  f"| {received / max(reads, 1) / 1e3:.1f} |", flush=True)
    finally:
        if topo:
            topo.destroy()
        netns.cleanup(prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
