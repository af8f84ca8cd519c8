"""perf over the measured run's steady training: a whole-machine
cpu-clock profile, reported by process and library for the benchmark's own
processes only (others may share the machine)."""
import shutil
import subprocess

import netns


def start(path, seconds, skip_s):
    """perf over `seconds` of the whole machine, from skip_s after now (the
    first steps: moments allocated, buffers first touched)."""
    if not shutil.which("perf"):
        return None
    return subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "499", "-a",
                             "-D", str(int(skip_s * 1000)), "-o", path, "--",
                             "sleep", str(seconds + skip_s)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ns_pids(topo):
    pids = set()
    for ns in [topo.server_ns] + [topo.worker_ns(i) for i in range(topo.workers)]:
        pids.update(netns.sh("ip", "netns", "pids", ns, check=False).split())
    return sorted(pids, key=int)


def report(proc, path, out_txt, pids):
    """perf's breakdown by process and library, of the benchmark's own
    processes only (others may share the machine), as a share of their samples."""
    if proc is None:
        return None
    try:
        proc.wait(timeout=120)
        r = subprocess.run(["perf", "report", "-i", path, "--stdio", "--no-children",
                            "--sort", "comm,dso", "--percent-limit", "1",
                            "--percentage", "relative"] +
                           (["--pid", ",".join(pids)] if pids else []),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        return None
    lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    with open(out_txt, "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines[:25]
