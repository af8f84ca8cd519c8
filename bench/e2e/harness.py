"""What every mode of the end-to-end benchmark (e2e.py) runs on: the log
line, the binaries of a build (binaries, BINARIES), the Harness that owns a
run's network namespaces and its directory of process logs, one measurement
that may fail without ending the run (attempt), whether PyTorch imports
(torch_ready), and --cleanup's sweep of every namespace named like ours
(cleanup_everything). compare.py, torch_bench.py and torch_overhead.py get
the Harness and log from e2e.py.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402

BINARIES = ("loco-coordinator", "loco-server", "loco-worker", "loco-bench-e2e-transport",
            "loco-bench-cpu-step")


def log(msg):
    print(f"e2e: {msg}", flush=True)


def cleanup_everything():
    """--cleanup without a prefix: every namespace named like ours."""
    names = [ln.split()[0] for ln in netns.sh("ip", "netns", "list", check=False).splitlines()
             if ln.strip()]
    prefixes = sorted({m.group(1) for n in names if (m := re.match(r"^(le\d+)-(srv|w\d+)$", n))})
    left = []
    for p in prefixes:
        left += netns.cleanup(p)
    return prefixes, left


def torch_ready():
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
    return r.returncode == 0


def attempt(failures, what, fn, *args, **kwargs):
    """Runs one measurement; a failure is logged and listed in the summary
    (its processes are already stopped) and the run goes on."""
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        failures.append(f"{what}: {first}")
        log(f"FAILED {what}: {e}")
        return None


def binaries(build_dir):
    """BINARIES in build_dir/bin by name; SystemExit naming the missing ones
    and the command that builds them."""
    bins = {b: os.path.join(build_dir, "bin", b) for b in BINARIES}
    missing = [p for p in bins.values() if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit(f"e2e: missing {', '.join(missing)}: build them first (cmake "
                         f"--build {build_dir} --target {' '.join(BINARIES)})")
    return bins


class Harness:
    """One run: its arguments, the build's binaries, its network namespaces
    (one netns.Topology at a time, shaped per call) and a fresh directory
    for the processes' logs (work)."""

    def __init__(self, args):
        self.args = args
        self.bins = binaries(args.build_dir)
        self.work = tempfile.mkdtemp(prefix="loco-e2e.")
        self.topo = None

    def topology(self, workers, rate_mbit):
        if self.topo is None or self.topo.workers != workers:
            if self.topo:
                left = self.topo.destroy()
                if left:
                    raise RuntimeError(f"namespaces left behind: {left}")
            self.topo = netns.Topology(self.args.prefix, workers)
            try:
                self.topo.create()
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                raise RuntimeError(f"cannot create the network namespaces and veth links "
                                   f"(needs root, iproute2 and a kernel with netns/veth): {e}")
        if rate_mbit:
            self.topo.shape(rate_mbit)
        else:
            self.topo.unshape()
        return self.topo

    def logs(self, group):
        d = os.path.join(self.work, group)
        os.makedirs(d, exist_ok=True)
        return d

    def close(self):
        left = netns.cleanup(self.args.prefix)
        if left:
            log(f"WARNING: namespaces left behind: {left}")
        return left
