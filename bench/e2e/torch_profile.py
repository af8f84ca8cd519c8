"""--torch-profile: where a step's CPU goes, torch peer against loco-worker.

The serial pair (torch-loco4-serial, worker-loco4-serial) runs once more
each, long enough for perf (perf_profile.start: cpu-clock at HZ samples per
second per CPU, the whole machine) to see PROFILE_S seconds of steady
training. perf's samples of the benchmark's processes, by process and
library, become milliseconds of CPU per step: samples / HZ over the steps
the window held (PROFILE_S / the run's median step), summed over the
workers (their namespaces) and over the servers and coordinator (the
server namespace). Side by side, the workers' columns say what CPU the
torch peer spends beyond the C++ worker, and in which library.

parse_script(), of_pids(), per_step(), table() and markdown() are pure
(torch_bench_test.py).
"""
import os
import subprocess

import netns
import perf_profile

PROFILE_ROWS = ("torch-loco4-serial", "worker-loco4-serial")
PROFILE_STEPS, PROFILE_S, PROFILE_SKIP_S = 150, 6, 1
# perf_profile.start's sampling frequency (-F), per CPU.
HZ = 499
# Our own code: the loco-worker binary, or the extension the torch peer loads.
OUR_CODE = "LoCo-PS code (loco-worker / loco_ps._core)"


def library(dso):
    """The row a library's samples go to: our own code under one name."""
    if dso == "loco-worker" or dso.startswith("_core."):
        return OUR_CODE
    return dso


def parse_script(text):
    """{(pid, library): samples} from `perf script -F pid,ip,dso` lines
    such as ' 8611      7f6722fbf42e (/usr/lib/x86_64-linux-gnu/libgrpc.so.29)'.
    (perf report's --pid filter keeps a shared library's samples of every
    process, the kernel's and libc's among them; each sample's own pid
    does not.)"""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        dso = parts[2].strip()
        if dso.startswith("(") and dso.endswith(")"):
            dso = dso[1:-1]
        key = (parts[0], library(os.path.basename(dso)))
        out[key] = out.get(key, 0) + 1
    return out


def of_pids(samples, pids):
    """{library: samples} of the processes `pids`."""
    out = {}
    for (pid, lib), n in samples.items():
        if pid in pids:
            out[lib] = out.get(lib, 0) + n
    return out


def per_step(samples, step_s, window_s=PROFILE_S, hz=HZ):
    """{library: CPU ms per step} of {library: samples} over the steps the
    window held."""
    steps = window_s / step_s
    return {lib: n / hz * 1000 / steps for lib, n in samples.items()}


def table(torch_ms, worker_ms, top=8):
    """Markdown rows: the workers' CPU ms per step by library, torch peer
    against loco-worker, the largest first, then the total."""
    libs = sorted(set(torch_ms) | set(worker_ms),
                  key=lambda lib: -max(torch_ms.get(lib, 0), worker_ms.get(lib, 0)))
    lines = ["| library (the workers) | loco-worker ms/step | torch peer ms/step | "
             "torch − worker |", "| --- | --- | --- | --- |"]
    shown = libs[:top]
    rest = libs[top:]
    rows = [(lib, worker_ms.get(lib, 0.0), torch_ms.get(lib, 0.0)) for lib in shown]
    if rest:
        rows.append(("the others", sum(worker_ms.get(lib, 0.0) for lib in rest),
                     sum(torch_ms.get(lib, 0.0) for lib in rest)))
    rows.append(("**all**", sum(worker_ms.values()), sum(torch_ms.values())))
    for lib, w, t in rows:
        lines.append(f"| {lib} | {w:.1f} | {t:.1f} | {t - w:+.1f} |")
    return lines


def roles(topo):
    """{"workers": pids in the worker namespaces, "servers": pids in the
    server namespace}, as strings."""
    def pids(names):
        out = set()
        for ns in names:
            out.update(netns.sh("ip", "netns", "pids", ns, check=False).split())
        return out
    return {"workers": pids(topo.worker_ns(i) for i in range(topo.workers)),
            "servers": pids([topo.server_ns])}


def _samples(path):
    r = subprocess.run(["perf", "script", "-i", path, "-F", "pid,ip,dso"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300)
    return parse_script(r.stdout)


def measure(run_row, topo, work, results, log, rows=PROFILE_ROWS, report_prefix="perf_torch_"):
    """Runs each of `rows` through run_row(name, on_training) -> row, under
    perf; returns {name: {"step_s": s, "workers": {library: ms per step},
    "servers": {...}, "others_share": the share of the machine's samples
    that other processes took}} and writes perf's own report to
    <report_prefix><name>.txt under `results`. A row that fails raises
    RuntimeError."""
    out = {}
    for name in rows:
        path = os.path.join(work, f"perf-{name}.data")
        started = []

        def start():
            started.append(perf_profile.start(path, PROFILE_S, PROFILE_SKIP_S))
            started.append(roles(topo))
        row = run_row(name, start)
        if not started or started[0] is None:
            log(f"profile of {name}: no perf")
            continue
        by_role = started[1]
        ours = sorted(by_role["workers"] | by_role["servers"], key=int)
        perf_profile.report(started[0], path,
                            os.path.join(results, f"{report_prefix}{name}.txt"), ours)
        got = {"step_s": row["step_s"]}
        samples = _samples(path)
        mine = 0
        for role, pids in by_role.items():
            counts = of_pids(samples, pids)
            mine += sum(counts.values())
            got[role] = per_step(counts, row["step_s"])
        # pid 0: the idle task.
        busy = sum(n for (pid, _), n in samples.items() if pid != "0")
        got["others_share"] = (busy - mine) / busy if busy else None
        out[name] = got
        log(f"profile of {name}: step {row['step_s']} s, workers "
            f"{sum(got['workers'].values()):.1f} CPU ms per step")
    return out


def markdown(profiles, pair=PROFILE_ROWS):
    """The --torch-profile section of one pair (torch row, loco-worker
    row): the workers' CPU per step by library, and the servers' total, of
    each profiled row."""
    torch_row, worker_row = pair
    if torch_row not in profiles or worker_row not in profiles:
        return ["- profile: a profiled row is missing (failed, or no perf)", ""]
    t, w = profiles[torch_row], profiles[worker_row]
    lines = [f"perf cpu-clock over {PROFILE_S} s of steady training of each row run once more "
             f"({PROFILE_STEPS} steps; median step: {worker_row} {w['step_s']:.4f} s, "
             f"{torch_row} {t['step_s']:.4f} s), in CPU milliseconds per step:", ""]
    lines += table(t["workers"], w["workers"])
    lines += ["", f"- servers and coordinator: {sum(w['servers'].values()):.1f} ms/step with "
              f"loco-worker, {sum(t['servers'].values()):.1f} with the torch peer"]
    shares = [x.get("others_share") for x in (w, t)]
    if all(x is not None for x in shares):
        lines.append(f"- other processes on the machine (not the benchmark's) took "
                     f"{100 * shares[0]:.0f} % and {100 * shares[1]:.0f} % of its busy CPU "
                     "samples during the two windows")
    lines.append("")
    return lines
