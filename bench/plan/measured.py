"""The planner's measured configurations: bench/e2e's rows in the columns
plan/measured_runs.h reads.

- bench/plan/measured.csv, what the default calibration is fitted to:
  bench/e2e/results/steps.csv (the measured run's matrix: two model sizes x
  1 and 10 Gbit/s x codecs, W = 4, S = 2) and bench/e2e/results/scaling.csv
  (W = 1..8, S = 1..4, three sizes, 10 Gbit/s), measured on a quiet machine;
- bench/plan/measured_loaded.csv, held out by validate.py and never fitted:
  bench/plan/results/new_runs.csv (measure.py: other link rates, W and S),
  measured on the same 2 cores after bench/e2e's runs (a first set was
  measured while other jobs loaded them, hence the file's name);
- bench/plan/measured_NAME.csv: bench/plan/results/NAME_runs.csv for each
  session NAME (session, session2, ...: measure.py --with-e2e --name NAME,
  all of the above measured again in one session, interleaved), with the
  column `set` that validate.py --session NAME reads, and `server_cpu_s`,
  the busiest server's CPU seconds per step (empty in sessions measured
  before it was).
Left out: the DDP rows (not our system) and the three rows that turn a
lever off (no overlap, gRPC's adaptive window, unary pushes), which the
model does not describe.
"""
import csv
import glob
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
QUIET_SOURCES = (os.path.join(ROOT, "bench", "e2e", "results", "steps.csv"),
                 os.path.join(ROOT, "bench", "e2e", "results", "scaling.csv"))
LOADED_SOURCES = (os.path.join(HERE, "results", "new_runs.csv"),)
# measure.py --with-e2e's sessions: results/NAME_runs.csv -> measured_NAME.csv.
SESSION_PATTERN = os.path.join(HERE, "results", "session*_runs.csv")
LEVERS_OFF = ("no-overlap", "adaptive-window", "unary-push")
# The machine bench/e2e measured on: every process shares its cores.
HOST_CORES = 2
COLUMNS = ["label", "source", "params", "workers", "servers", "batch_per_worker", "link_mbit",
           "codec", "bits", "block", "pull_codec", "pull_bits", "pull_block", "host_cores",
           "step_s", "server_rss_mb", "push_bytes", "pull_bytes"]


def pull_bits(config):
    """The return delta's code width: 4 for the *-pull4 rows (loco-server
    --pull-bits 4), else the server's default 8."""
    return 4 if config.endswith("pull4") else 8


def convert(row, source):
    """One bench/e2e CSV row -> a measured.csv row, or None when left out."""
    if row.get("system", "loco-ps") != "loco-ps":
        return None
    if any(lever in row["config"] for lever in LEVERS_OFF):
        return None
    workers = int(row["workers"])
    return {"label": row["config"], "source": source, "params": row["params"],
            "workers": workers, "servers": row["servers"],
            "batch_per_worker": int(row["batch"]) // workers, "link_mbit": row["link_mbit"],
            "codec": row["codec"], "bits": row["bits"] or 4, "block": row["block"] or 256,
            "pull_codec": row["pull"], "pull_bits": row.get("pull_bits") or pull_bits(
                row["config"]),
            "pull_block": 128, "host_cores": row.get("host_cores") or HOST_CORES,
            "step_s": row["step_s"], "server_rss_mb": row.get("server_peak_rss_mb", ""),
            "push_bytes": row["push_bytes_per_step"], "pull_bytes": row["pull_bytes_per_step"],
            "set": row.get("set", ""), "server_cpu_s": row.get("server_cpu_s_per_step", "")}


def collect(sources):
    rows = []
    for path in sources:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for row in csv.DictReader(f):
                out = convert(row, os.path.relpath(path, ROOT))
                if out:
                    rows.append(out)
    return rows


def write(path, rows, columns):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def outputs():
    """(sources, output file name, columns) of every file measured.py writes."""
    out = [(QUIET_SOURCES, "measured.csv", COLUMNS),
           (LOADED_SOURCES, "measured_loaded.csv", COLUMNS)]
    for path in sorted(glob.glob(SESSION_PATTERN)):
        name = os.path.basename(path)[:-len("_runs.csv")]
        # server_cpu_s: sessions measured after the sampler read the
        # servers' CPU have it; older ones leave it empty.
        out.append(((path,), f"measured_{name}.csv", COLUMNS + ["set", "server_cpu_s"]))
    return out


if __name__ == "__main__":
    for sources, name, columns in outputs():
        if not any(os.path.exists(p) for p in sources):
            continue
        rows = collect(sources)
        write(os.path.join(HERE, name), rows, columns)
        print(f"measured.py: {len(rows)} runs -> bench/plan/{name}")
