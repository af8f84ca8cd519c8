#!/usr/bin/python3
"""New measured configurations for the planner's validation: link rates,
worker and shard counts that bench/e2e's measured run does not have (it
measures 1 and 10 Gbit/s, W = 4, S = 2 and a 10 Gbit/s W/S sweep), each
run like bench/e2e's rows (runs.run_ps: every process on this machine,
one tbf-shaped veth link per worker). Writes bench/plan/results/
new_runs.csv in bench/e2e's columns plus pull_bits and host_cores, and
the machine's load average before each run (the machine is shared).
Each configuration runs --repeat times in alternating rounds; its row is
the run with the median step (step_s_runs lists every run's step). The
first configuration is an anchor: a point of bench/e2e's scaling sweep
(1.9M parameters, W = 4, S = 2, 10 Gbit/s, measured there at 0.0227 s),
measured again so that the table shows how far the machine itself drifted.

  bench/e2e/run.sh cannot run this; run it as root:
  /usr/bin/python3 bench/plan/measure.py [--build-dir build] [--steps 12]

Needs loco-coordinator, loco-server and loco-worker in --build-dir/bin.
About 80 s per round on 2 cores (3 minutes when other jobs load them).
"""
import argparse
import csv
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "e2e"))
import blas  # noqa: E402
import netns  # noqa: E402
import runs  # noqa: E402

# (name, hidden, workers, servers, link Mbit/s, codec, bits, pull, pull bits,
# global batch): none of these (W, S, rate) points is in bench/e2e's results.
ANCHOR = ("anchor-loco4-delta", [1024, 1024], 4, 2, 10000, "loco", 4, "delta", 8, 256)
CONFIGS = [
    ANCHOR,
    ("loco4-delta", [1024, 1024], 3, 1, 300, "loco", 4, "delta", 8, 192),
    ("fp32-ps", [1024, 1024], 2, 1, 200, "fp32", 4, "fp32", 8, 128),
    ("loco4-delta", [2048, 2048], 2, 2, 2500, "loco", 4, "delta", 8, 128),
    ("loco4-delta", [2048, 2048], 4, 3, 500, "loco", 4, "delta", 8, 256),
    ("loco4-bf16", [2048, 2048], 3, 2, 2500, "loco", 4, "bf16", 8, 192),
    ("loco4-delta-pull4", [3072, 3072], 6, 2, 400, "loco", 4, "delta", 4, 192),
    ("fp32-ps", [3072, 3072], 2, 1, 3000, "fp32", 4, "fp32", 8, 128),
    ("loco4-delta", [3072, 3072], 5, 3, 5000, "loco", 4, "delta", 8, 320),
]


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each configuration, 1..9")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("measure: SKIPPED: needs root (network namespaces, tc)")
        return 77
    if not 5 <= a.steps <= 1000:
        ap.error(f"--steps must be in [5, 1000], got {a.steps}")
    if not 1 <= a.repeat <= 9:
        ap.error(f"--repeat must be in [1, 9], got {a.repeat}")
    bins = {b: os.path.join(a.build_dir, "bin", b)
            for b in ("loco-coordinator", "loco-server", "loco-worker")}
    missing = [p for p in bins.values() if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit(f"measure: missing {', '.join(missing)}: build them first")
    print(f"measure: {blas.choose('auto')}", flush=True)
    os.makedirs(a.results, exist_ok=True)
    prefix = f"le{os.getpid() % 10**7}"
    work = tempfile.mkdtemp(prefix="loco-plan-measure.")
    by_config, topo = {}, None
    try:
        for round_ in range(a.repeat):
            for k, (name, hidden, w, s, rate, codec, bits, pull, pull_bits, batch) in \
                    enumerate(CONFIGS):
                if topo is None or topo.workers != w:
                    if topo:
                        topo.destroy()
                    topo = netns.Topology(prefix, w)
                    topo.create()
                topo.shape(rate)
                cfg = {"name": name, "codec": codec, "bits": bits, "pull": pull,
                       "hidden": hidden, "block": 256, "worker_args": [],
                       "server_args": ["--pull-bits", pull_bits] if pull == "delta" else [],
                       "servers": s, "steps": a.steps, "batch": batch, "lr": 1e-3,
                       "eval_every": 0, "target": 0.8, "warmup": 2}
                load = load_average()
                t0 = time.monotonic()
                row = runs.run_ps(topo, bins, work, cfg, limit_s=300)
                row.update(pull_bits=pull_bits, host_cores=os.cpu_count(), load_before=load)
                by_config.setdefault(k, []).append(row)
                print(f"measure: round {round_ + 1}: {name} {runs.mlp_params(hidden)} params "
                      f"W={w} S={s} {rate} Mbit/s: step {row['step_s']} s (load {load}, "
                      f"{time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        netns.cleanup(prefix)
    rows = []
    for k in sorted(by_config):
        done = sorted(by_config[k], key=lambda r: r["step_s"])
        row = dict(done[(len(done) - 1) // 2])
        row["step_s_runs"] = " ".join(str(r["step_s"]) for r in by_config[k])
        row["load_before"] = " ".join(str(r["load_before"]) for r in by_config[k])
        rows.append(row)
    path = os.path.join(a.results, "new_runs.csv")
    keys = list(rows[0].keys()) if rows else []
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=keys, lineterminator="\n", extrasaction="ignore")
        out.writeheader()
        out.writerows(rows)
    print(f"measure: {len(rows)} runs -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
