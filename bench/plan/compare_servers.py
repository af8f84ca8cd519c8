#!/usr/bin/python3
"""Two loco-server builds on measure.py's configurations, alternated.

Runs each chosen configuration (measure.py's CONFIGS and SIZE_CONFIGS,
named by `--list`) as measure.run_config runs it, once with the server
of --build-dir and once with --against-server, and again --repeat times,
alternating which goes first; everything else (coordinator, workers,
links) is --build-dir's. On a shared machine only runs taken in turn
compare: the step time of one configuration drifts by tens of per cent
between hours. Prints, per configuration and server, the step time, the
servers' CPU per step and their peak RSS of every run, and writes them to
results/compare_servers.csv (one row per run). bench/plan/README's "Fresh
pages for every push" was measured this way.

  run as root (network namespaces, tc):
  /usr/bin/python3 bench/plan/compare_servers.py --against-server OLD/bin/loco-server
      [--build-dir build] [--config NAME ...] [--repeat 3] [--steps 12]
  /usr/bin/python3 bench/plan/compare_servers.py --list
"""
import argparse
import csv
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench", "e2e"))
import measure  # noqa: E402
import netns  # noqa: E402
import runs  # noqa: E402

# What each run's row keeps (runs.run_ps's fields).
FIELDS = ("step_s", "server_cpu_s_per_step", "server_peak_rss_mb")


def config_name(c):
    """A configuration's name on the command line, e.g.
    fp32-ps-20.0M-W4-S2-1000mbit."""
    return (f"{c.name}-{runs.mlp_params(c.hidden) / 1e6:.1f}M-W{c.workers}-S{c.servers}-"
            f"{c.rate}mbit")


def known_configs():
    """Every configuration measure.py runs without --with-e2e, by name (the
    first of equal names wins; there are none today)."""
    out = {}
    for c in measure.CONFIGS + measure.SIZE_CONFIGS:
        out.setdefault(config_name(c), c)
    return out


# The default: the two configurations whose pushes exceed 32 MiB (glibc
# maps such blocks fresh), where the server's buffer reuse shows.
DEFAULT_CONFIGS = ("fp32-ps-20.0M-W4-S2-1000mbit", "fp32-ps-11.9M-W2-S1-3000mbit")


def choose(names, known):
    """The Configs named, in order; SystemExit naming the unknown ones and
    where the known ones are listed."""
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"compare_servers: unknown configuration(s) {', '.join(unknown)}; "
                         f"--list prints the {len(known)} known ones")
    return [known[n] for n in names]


def summary(rows):
    """Per (configuration, server): the runs' values of FIELDS, as
    'median (lowest-highest)' strings, in the order first seen."""
    groups = {}
    for r in rows:
        groups.setdefault((r["config"], r["server"]), []).append(r)
    out = []
    for (config, server), rs in groups.items():
        line = {"config": config, "server": server, "runs": len(rs)}
        for f in FIELDS:
            v = [r[f] for r in rs if r.get(f) is not None]
            line[f] = (f"{statistics.median(v):g} ({min(v):g}-{max(v):g})" if v else "n/a")
        out.append(line)
    return out


def run_pair(topo, bins, against, work, c, steps, first_against):
    """One run of `c` with each server, `against` first when first_against;
    [(server label, row)]. A failed run raises RuntimeError."""
    out = []
    for label in (("against", "new") if first_against else ("new", "against")):
        b = dict(bins, **({"loco-server": against} if label == "against" else {}))
        out.append((label, measure.run_config(topo, b, work, c, steps)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--against-server", help="the other loco-server binary")
    ap.add_argument("--config", action="append", metavar="NAME",
                    help="a configuration to run (repeatable; default: "
                         + ", ".join(DEFAULT_CONFIGS) + ")")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each server, 1..9")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--list", action="store_true", help="print the known configurations")
    a = ap.parse_args(argv)
    known = known_configs()
    if a.list:
        for name in known:
            print(name)
        return 0
    configs = choose(a.config or DEFAULT_CONFIGS, known)
    if not 1 <= a.repeat <= 9:
        ap.error(f"--repeat must be in [1, 9], got {a.repeat}")
    if not 5 <= a.steps <= 1000:
        ap.error(f"--steps must be in [5, 1000], got {a.steps}")
    if not a.against_server:
        ap.error("--against-server is required: the loco-server binary to compare with")
    if not os.access(a.against_server, os.X_OK):
        ap.error(f"--against-server {a.against_server} is not an executable file")
    bins = {b: os.path.join(a.build_dir, "bin", b)
            for b in ("loco-coordinator", "loco-server", "loco-worker")}
    missing = [p for p in bins.values() if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit(f"compare_servers: missing {', '.join(missing)}: build them first")
    if os.geteuid() != 0:
        print("compare_servers: SKIPPED: needs root (network namespaces, tc)")
        return 77
    prefix = f"lc{os.getpid() % 10**7}"
    work = tempfile.mkdtemp(prefix="loco-compare-servers.")
    rows, failed, topo = [], [], None
    try:
        for round_ in range(a.repeat):
            for c in configs:
                topo = measure.topology_for(topo, prefix, c.workers)
                t0 = time.monotonic()
                try:
                    pair = run_pair(topo, bins, a.against_server, work, c, a.steps,
                                    first_against=round_ % 2 == 1)
                except RuntimeError as e:
                    failed.append(f"round {round_ + 1}: {config_name(c)}: "
                                  f"{str(e).splitlines()[0]}")
                    print(f"compare_servers: FAILED: {failed[-1]}", flush=True)
                    continue
                for label, row in pair:
                    rows.append({"config": config_name(c), "server": label, "round": round_ + 1,
                                 **{f: row.get(f) for f in FIELDS}})
                print(f"compare_servers: round {round_ + 1}: {config_name(c)}: "
                      + ", ".join(f"{label} step {row['step_s']} s" for label, row in pair)
                      + f" ({time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        netns.cleanup(prefix)
    os.makedirs(a.results, exist_ok=True)
    path = os.path.join(a.results, "compare_servers.csv")
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=["config", "server", "round", *FIELDS],
                             lineterminator="\n")
        out.writeheader()
        out.writerows(rows)
    print(f"compare_servers: new = {bins['loco-server']}, against = {a.against_server}")
    print("| configuration | server | runs | " + " | ".join(FIELDS) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in FIELDS) + " |")
    for s in summary(rows):
        print(f"| {s['config']} | {s['server']} | {s['runs']} | "
              + " | ".join(s[f] for f in FIELDS) + " |")
    print(f"compare_servers: {len(rows)} runs -> {path}")
    for f in failed:
        print(f"compare_servers: FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
