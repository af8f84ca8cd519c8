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

With --with-e2e every configuration of bench/plan/measured.csv (bench/e2e's
matrix and scaling sweep, 36 runs) is measured again in the same rounds,
interleaved with the new ones, and the rows go to results/NAME_runs.csv
(--name, default session) with a column `set` (steps, scaling: the bench/e2e file the configuration
comes from; new; anchor). validate.py --session then fits and predicts
runs of one session only, so that the machine's drift between the
calibration runs and the held-out runs (1.6 times at the anchor) cannot
pass for the model's error. About 6 minutes a round on 2 cores. With
--sizes, larger models than bench/e2e's (20.0M to 73.6M parameters, set
size) join the rounds, to check the model beyond the sizes it was fitted
on; their rows also go to results/NAME_runs.csv.

  bench/e2e/run.sh cannot run this; run it as root:
  /usr/bin/python3 bench/plan/measure.py [--build-dir build] [--steps 12] [--with-e2e]
      [--sizes] [--name NAME]

Needs loco-coordinator, loco-server and loco-worker in --build-dir/bin.
About 80 s per round on 2 cores (3 minutes when other jobs load them).
"""
import argparse
import collections
import csv
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "e2e"))
import blas  # noqa: E402
import netns  # noqa: E402
import runs  # noqa: E402

# One configuration: bench/e2e's row fields, and the set it belongs to.
Config = collections.namedtuple(
    "Config", "name hidden workers servers rate codec bits pull pull_bits batch block set",
    defaults=(256, "new"))
# None of these (W, S, rate) points is in bench/e2e's results.
ANCHOR = Config("anchor-loco4-delta", [1024, 1024], 4, 2, 10000, "loco", 4, "delta", 8, 256,
                set="anchor")
CONFIGS = [
    ANCHOR,
    Config("loco4-delta", [1024, 1024], 3, 1, 300, "loco", 4, "delta", 8, 192),
    Config("fp32-ps", [1024, 1024], 2, 1, 200, "fp32", 4, "fp32", 8, 128),
    Config("loco4-delta", [2048, 2048], 2, 2, 2500, "loco", 4, "delta", 8, 128),
    Config("loco4-delta", [2048, 2048], 4, 3, 500, "loco", 4, "delta", 8, 256),
    Config("loco4-bf16", [2048, 2048], 3, 2, 2500, "loco", 4, "bf16", 8, 192),
    Config("loco4-delta-pull4", [3072, 3072], 6, 2, 400, "loco", 4, "delta", 4, 192),
    Config("fp32-ps", [3072, 3072], 2, 1, 3000, "fp32", 4, "fp32", 8, 128),
    Config("loco4-delta", [3072, 3072], 5, 3, 5000, "loco", 4, "delta", 8, 320),
]
# Larger models than any bench/e2e run (20.0M, 42.6M and 73.6M parameters
# against its 1.9M to 11.9M): with --sizes, held out to check how the
# model extrapolates in size (set "size").
SIZE_CONFIGS = [
    Config("loco4-delta", [4096, 4096], 4, 2, 1000, "loco", 4, "delta", 8, 256, set="size"),
    Config("fp32-ps", [4096, 4096], 4, 2, 1000, "fp32", 4, "fp32", 8, 256, set="size"),
    Config("loco4-bf16", [4096, 4096], 3, 2, 3000, "loco", 4, "bf16", 8, 192, set="size"),
    Config("loco4-delta", [6144, 6144], 4, 2, 1000, "loco", 4, "delta", 8, 256, set="size"),
    Config("loco4-delta", [6144, 6144], 2, 3, 10000, "loco", 4, "delta", 8, 128, set="size"),
    Config("loco4-delta", [8192, 8192], 4, 2, 1000, "loco", 4, "delta", 8, 256, set="size"),
]
# bench/e2e's models: two hidden layers of equal width.
WIDTHS = (1024, 2048, 3072)


def hidden_for(params):
    """The hidden layers of the bench/e2e model with `params` parameters."""
    for width in WIDTHS:
        if runs.mlp_params([width, width]) == params:
            return [width, width]
    raise SystemExit(f"measure: no bench/e2e model has {params} parameters")


def e2e_configs(measured_csv):
    """measured.csv's rows (bench/e2e's configurations) as Configs, in the
    order of the file; `set` is the bench/e2e file each came from."""
    out = []
    with open(measured_csv) as f:
        for r in csv.DictReader(f):
            w = int(r["workers"])
            out.append(Config(r["label"], hidden_for(int(r["params"])), w, int(r["servers"]),
                              int(r["link_mbit"]), r["codec"], int(r["bits"]), r["pull_codec"],
                              int(r["pull_bits"]), int(r["batch_per_worker"]) * w,
                              block=int(r["block"]),
                              set=os.path.splitext(os.path.basename(r["source"]))[0]))
    return out


def run_config(topo, bins, work, c, steps, on_training=None):
    """One run of `c` on `topo` (already W wide), as bench/e2e runs it;
    on_training as runs.run_ps's."""
    topo.shape(c.rate)
    cfg = {"name": c.name, "codec": c.codec, "bits": c.bits, "pull": c.pull,
           "hidden": c.hidden, "block": c.block, "worker_args": [],
           "server_args": ["--pull-bits", c.pull_bits] if c.pull == "delta" else [],
           "servers": c.servers, "steps": steps, "batch": c.batch, "lr": 1e-3,
           "eval_every": 0, "target": 0.8, "warmup": 2}
    return runs.run_ps(topo, bins, work, cfg, limit_s=300, on_training=on_training)


def topology_for(topo, prefix, workers):
    """`topo` when it is `workers` wide, else a new topology of that width
    (the old one destroyed), so that the links are built once per W."""
    if topo is not None and topo.workers == workers:
        return topo
    if topo:
        topo.destroy()
    topo = netns.Topology(prefix, workers)
    topo.create()
    return topo


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each configuration, 1..9")
    ap.add_argument("--with-e2e", action="store_true",
                    help="also measure bench/e2e's configurations (measured.csv) in the same "
                         "rounds; writes results/NAME_runs.csv")
    ap.add_argument("--sizes", action="store_true",
                    help="also measure larger models than bench/e2e's (set size: 20.0M to "
                         "73.6M parameters; about 4 more minutes a round)")
    ap.add_argument("--name", default="session",
                    help="--with-e2e: the session's name, session[0-9a-z_-]* "
                         "(results/NAME_runs.csv; measured.py makes measured_NAME.csv of it)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("measure: SKIPPED: needs root (network namespaces, tc)")
        return 77
    if not 5 <= a.steps <= 1000:
        ap.error(f"--steps must be in [5, 1000], got {a.steps}")
    if not 1 <= a.repeat <= 9:
        ap.error(f"--repeat must be in [1, 9], got {a.repeat}")
    if not re.fullmatch(r"session[0-9a-z_-]*", a.name):
        ap.error(f"--name must be 'session' followed by [0-9a-z_-], got {a.name!r}")
    bins = {b: os.path.join(a.build_dir, "bin", b)
            for b in ("loco-coordinator", "loco-server", "loco-worker")}
    missing = [p for p in bins.values() if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit(f"measure: missing {', '.join(missing)}: build them first")
    configs = list(CONFIGS)
    if a.with_e2e:
        configs += e2e_configs(os.path.join(HERE, "measured.csv"))
    if a.sizes:
        configs += SIZE_CONFIGS
    # Rounds go by W, so that the links are built once per W and round;
    # every other round runs the order backwards.
    order = sorted(range(len(configs)), key=lambda k: (configs[k].workers, k))
    print(f"measure: {blas.choose('auto')}", flush=True)
    os.makedirs(a.results, exist_ok=True)
    prefix = f"le{os.getpid() % 10**7}"
    work = tempfile.mkdtemp(prefix="loco-plan-measure.")
    by_config, topo, failed = {}, None, []
    try:
        for round_ in range(a.repeat):
            for k in (order if round_ % 2 == 0 else order[::-1]):
                c = configs[k]
                topo = topology_for(topo, prefix, c.workers)
                load = load_average()
                t0 = time.monotonic()
                try:
                    row = run_config(topo, bins, work, c, a.steps)
                except RuntimeError as e:  # one failed run costs its row, not the session
                    failed.append(f"round {round_ + 1}: {c.set} {c.name} W={c.workers} "
                                  f"S={c.servers} {c.rate} Mbit/s: {str(e).splitlines()[0]}")
                    print(f"measure: FAILED: {failed[-1]}", flush=True)
                    continue
                row.update(pull_bits=c.pull_bits, host_cores=os.cpu_count(), load_before=load,
                           set=c.set)
                by_config.setdefault(k, []).append(row)
                print(f"measure: round {round_ + 1}: {c.set} {c.name} "
                      f"{runs.mlp_params(c.hidden)} params W={c.workers} S={c.servers} "
                      f"{c.rate} Mbit/s: step {row['step_s']} s (load {load}, "
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
    session = a.with_e2e or a.sizes
    path = os.path.join(a.results, f"{a.name}_runs.csv" if session else "new_runs.csv")
    keys = list(rows[0].keys()) if rows else []
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=keys, lineterminator="\n", extrasaction="ignore")
        out.writeheader()
        out.writerows(rows)
    print(f"measure: {len(rows)} runs -> {path}")
    for f in failed:
        print(f"measure: FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
