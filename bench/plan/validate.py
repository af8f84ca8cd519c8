#!/usr/bin/python3
"""Validates loco-plan's cost model on configurations it was not fitted to.

Calibrates (loco-plan --mode=calibrate) on a subset of the quiet
machine's measured runs (bench/plan/measured.csv) and predicts every run,
and the runs of bench/plan/measured_loaded.csv, with the result:

  calibration set  bench/e2e's 1 Gbit/s matrix (W = 4, S = 2, the 1.9M and
                   11.9M models, every codec, batch 256 and 64) and the
                   10 Gbit/s scaling rows of (W, S) = (1, 2), (4, 2), (4, 4)
                   for the 1.9M and 11.9M models;
  held out         the rest of measured.csv: the 10 Gbit/s matrix (its
                   codecs), W = 2 and 8, S = 1, the 5.8M model;
  held out, new rates
                   measured_loaded.csv, measure.py's runs at link rates the
                   calibration never saw (200 Mbit/s to 5 Gbit/s) with
                   W = 2, 3, 5, 6 and S = 3, on the same machine, later
                   (the file's name is from a first set measured while
                   other jobs loaded it); its anchor row repeats a
                   calibration point and says how far the machine drifted.

With --session the runs come from bench/plan/measured_session.csv alone
(measure.py --with-e2e: the same calibration and held-out configurations,
and the new link rates, measured again in one session, interleaved, so
that the machine's drift between sessions is not counted as the model's
error); the results go to results/session/.

Writes validation.md (predicted against measured, side by side, with the
error; the summary per set) and validation.png (gnuplot; skipped without
it) to --out-dir, with validation_calibration_runs.csv, the calibration
set, and validation_calibration.txt, its calibration. --smoke: into a temporary folder, and checks only that every
run was predicted (the ctest plan_validate_smoke).
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = 0.25
ROLES = ("calibration", "held out", "held out (new rates)", "anchor", "held out (new sizes)")
CALIBRATION_POINTS = {(1, 2), (4, 2), (4, 4)}
CALIBRATION_MODELS = {1863690, 11882506}


def origin(row):
    """Where a run's configuration comes from: steps or scaling (bench/e2e's
    matrix and sweep), new (measure.py's link rates) or anchor. A session's
    rows say so in their column `set`; the others by their source file."""
    if row.get("set"):
        return row["set"]
    if row["label"].startswith("anchor"):
        return "anchor"
    source = os.path.splitext(os.path.basename(row["source"]))[0]
    return "new" if source == "new_runs" else source


def role(row):
    """calibration, held out, held out (new rates), held out (new sizes)
    or anchor."""
    kind = origin(row)
    if kind == "anchor":
        return "anchor"
    if kind == "new":
        return "held out (new rates)"
    if kind == "size":
        return "held out (new sizes)"
    return "calibration" if in_calibration_set(row) else "held out"


def in_calibration_set(row):
    source = origin(row)
    if source == "steps":
        return int(row["link_mbit"]) == 1000
    if source == "scaling":
        return ((int(row["workers"]), int(row["servers"])) in CALIBRATION_POINTS
                and int(row["params"]) in CALIBRATION_MODELS)
    return False


def plan_args(row, calibration):
    """loco-plan's flags for one measured run (bench/e2e's placement: every
    process on one host, the S servers behind the W worker links)."""
    w, s, mbit = int(row["workers"]), int(row["servers"]), float(row["link_mbit"])
    args = ["--calibration", calibration, "--format", "json", "--max-shards", "8",
            "--params", row["params"], "--workers", str(w), "--shards", str(s),
            "--batch-per-gpu", row["batch_per_worker"], "--link-gbps", repr(mbit / 1000),
            "--server-link-gbps", repr(mbit / 1000 * w / s),
            "--shared-cores", row["host_cores"], "--codec", row["codec"],
            "--pull-codec", row["pull_codec"]]
    # loco-plan refuses a codec's settings beside a codec without them.
    if row["pull_codec"] == "delta":
        args += ["--pull-bits", row["pull_bits"], "--pull-block", row["pull_block"]]
    if row["codec"] == "loco":
        args += ["--bits", row["bits"], "--block", row["block"]]
    return args


def run_plan(loco_plan, args):
    """loco-plan with `args`, run from the repository's root (so that the
    paths it records are relative to it); SystemExit when it fails."""
    r = subprocess.run([loco_plan] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"validate: {' '.join([loco_plan] + args)}: exit {r.returncode}: "
                         f"{r.stderr.strip()}")
    return r


def predict_all(loco_plan, rows, calibration):
    out = []
    for row in rows:
        p = json.loads(run_plan(loco_plan, plan_args(row, calibration)).stdout)
        measured = float(row["step_s"])
        rss = float(row["server_rss_mb"]) * 2**20 if row["server_rss_mb"] else None
        cpu = float(row["server_cpu_s"]) if row.get("server_cpu_s") else None
        out.append(dict(row, role=role(row), predicted_s=p["step_s"],
                        error=p["step_s"] / measured - 1, bound=p["bound"],
                        predicted_push=p["push_bytes_per_worker"],
                        predicted_rss_mb=p["server_memory_bytes"] / 2**20,
                        rss_error=(p["server_memory_bytes"] / rss - 1) if rss else None,
                        predicted_cpu_s=p["server_cpu_s"],
                        cpu_error=(p["server_cpu_s"] / cpu - 1) if cpu else None))
    return out


def summary(rows, key="error"):
    errors = [abs(r[key]) for r in rows if r[key] is not None]
    if not errors:
        return "no runs"
    within = sum(e <= TARGET for e in errors)
    return (f"{len(errors)} runs: median |error| {100 * statistics.median(errors):.0f}%, "
            f"largest {100 * max(errors):.0f}%, {within}/{len(errors)} within "
            f"{100 * TARGET:.0f}%")


def _mb(x):
    return f"{x:.1f}"


def _cpu(r):
    if r.get("cpu_error") is None:
        return "–"
    return (f"{float(r['server_cpu_s']):.4f} / {r['predicted_cpu_s']:.4f} "
            f"({100 * r['cpu_error']:+.0f}%)")


def table(rows):
    # The server CPU column only where the runs measured it.
    cpu = any(r.get("cpu_error") is not None for r in rows)
    out = ["| set | from | config | params | W | S | link Mbit/s | batch/worker | "
           "measured step s | predicted step s | error | predicted bound | push bytes "
           "(counted = exact) | server RSS MB measured / predicted |"
           + (" server CPU s/step measured / predicted (error) |" if cpu else ""),
           "| --- " * (15 if cpu else 14) + "|"]
    for r in rows:
        push_ok = "=" if int(r["push_bytes"]) == r["predicted_push"] else "≠"
        rss = (f"{r['server_rss_mb']} / {_mb(r['predicted_rss_mb'])}" if r["server_rss_mb"]
               else "–")
        out.append(f"| {r['role']} | "
                   f"{origin(r)} | {r['label']} | "
                   f"{int(r['params']) / 1e6:.1f}M | {r['workers']} | {r['servers']} | "
                   f"{r['link_mbit']} | {r['batch_per_worker']} | {float(r['step_s']):.4f} | "
                   f"{r['predicted_s']:.4f} | {100 * r['error']:+.0f}% | {r['bound']} | "
                   f"{r['push_bytes']} {push_ok} | {rss} |"
                   + (f" {_cpu(r)} |" if cpu else ""))
    return "\n".join(out)


def plot(out_dir, rows):
    """validation.png: predicted against measured step, log-log, the
    calibration and held-out runs apart, with y = x and the ±25% band."""
    if not shutil.which("gnuplot"):
        return None
    dat = os.path.join(out_dir, "validation.dat")
    with open(dat, "w") as f:
        for group in ROLES:
            f.write(f"# {group}\n")
            for r in rows:
                if r["role"] == group:
                    f.write(f"{float(r['step_s'])} {r['predicted_s']}\n")
            f.write("\n\n")
    png = os.path.join(out_dir, "validation.png")
    script = (f"set terminal pngcairo size 760,640\nset output '{png}'\n"
              "set logscale xy\nset grid\nset key top left\n"
              "set xlabel 'measured step, s (bench/e2e, 2 cores, shaped links)'\n"
              "set ylabel 'predicted step, s (loco-plan)'\n"
              "set title 'loco-plan: predicted against measured step time'\n"
              "set xrange [0.01:5]\nset yrange [0.01:5]\n"
              f"plot x title 'predicted = measured' lc rgb 'black', "
              f"1.25*x title '±25%' dt 2 lc rgb 'gray', 0.75*x notitle dt 2 lc rgb 'gray', "
              f"'{dat}' index 0 using 1:2 with points pt 7 ps 1.2 lc rgb '#1f77b4' "
              f"title 'calibration runs', "
              f"'{dat}' index 1 using 1:2 with points pt 9 ps 1.5 lc rgb '#d62728' "
              f"title 'held out', "
              f"'{dat}' index 2 using 1:2 with points pt 11 ps 1.5 lc rgb '#ff7f0e' "
              f"title 'held out, new link rates', "
              f"'{dat}' index 3 using 1:2 with points pt 5 ps 1.3 lc rgb '#2ca02c' "
              f"title 'anchor (a calibration point measured again)', "
              f"'{dat}' index 4 using 1:2 with points pt 13 ps 1.5 lc rgb '#9467bd' "
              f"title 'held out, larger models'\n")
    subprocess.run(["gnuplot"], input=script, text=True, check=True, timeout=60)
    os.remove(dat)
    return png


def main():
    ap = argparse.ArgumentParser(description="loco-plan's predictions against held-out runs")
    ap.add_argument("--loco-plan", default=os.path.join(ROOT, "build", "bin", "loco-plan"))
    ap.add_argument("--measured", default=os.path.join(HERE, "measured.csv"))
    ap.add_argument("--measured-loaded", default=os.path.join(HERE, "measured_loaded.csv"),
                    help="runs that are only predicted, never fitted ('' = none)")
    ap.add_argument("--out-dir", default=None,
                    help="default: results/, or results/session/ with --session")
    ap.add_argument("--session", nargs="?", const="session", default=None, metavar="NAME",
                    help="fit and predict the runs of one session only: measured_NAME.csv "
                         "(measure.py --with-e2e --name NAME; NAME defaults to 'session'), "
                         "results into results/NAME/")
    ap.add_argument("--smoke", action="store_true",
                    help="write into a temporary folder; check only that every run was "
                         "predicted")
    a = ap.parse_args()
    a.loco_plan = os.path.abspath(a.loco_plan)
    if a.session:
        if not re.fullmatch(r"session[0-9a-z_-]*", a.session):
            ap.error(f"--session must be 'session' followed by [0-9a-z_-], got {a.session!r}")
        a.measured = os.path.join(HERE, f"measured_{a.session}.csv")
        a.measured_loaded = ""
    if a.out_dir is None:
        a.out_dir = os.path.join(HERE, "results", a.session or "")
    if not os.path.exists(a.measured):
        raise SystemExit(f"validate: {a.measured} does not exist: run measure.py"
                         f"{f' --with-e2e --name {a.session}' if a.session else ''} and "
                         "measured.py first")
    if not os.access(a.loco_plan, os.X_OK):
        raise SystemExit(f"validate: {a.loco_plan} is not an executable: build it first "
                         "(cmake --build build --target loco-plan)")
    with open(a.measured) as f:
        rows = list(csv.DictReader(f))
    if a.measured_loaded:
        with open(a.measured_loaded) as f:
            rows += list(csv.DictReader(f))
    out_dir = tempfile.mkdtemp(prefix="loco-plan-validate.") if a.smoke else a.out_dir
    try:
        os.makedirs(out_dir, exist_ok=True)
        subset = os.path.join(out_dir, "validation_calibration_runs.csv")
        with open(subset, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
            w.writeheader()
            w.writerows(r for r in rows if in_calibration_set(r))
        calibration = os.path.relpath(os.path.join(out_dir, "validation_calibration.txt"), ROOT)
        run_plan(a.loco_plan, ["--mode", "calibrate", "--measured", os.path.relpath(subset, ROOT),
                               "--write-calibration", calibration])
        predicted = predict_all(a.loco_plan, rows, calibration)
        by_role = {g: [r for r in predicted if r["role"] == g] for g in ROLES}
        png = None if a.smoke else plot(out_dir, predicted)
        md = ["# loco-plan: predicted against measured", "",
              f"Generated by `bench/plan/validate.py{f' --session {a.session}' if a.session else ''}` "
              f"from `{os.path.relpath(a.measured, ROOT)}`; the calibration fitted to the "
              "calibration set alone is `validation_calibration.txt`.", "",
              f"- step time, calibration set: {summary(by_role['calibration'])}",
              f"- step time, held out: {summary(by_role['held out'])}",
              f"- step time, held out, new link rates: "
              f"{summary(by_role['held out (new rates)'])}",
              f"- step time, anchor (a calibration point measured again): "
              f"{summary(by_role['anchor'])}",
              f"- server peak RSS, every run not fitted: "
              f"{summary([r for r in predicted if r['role'] != 'calibration'], 'rss_error')}",
              f"- push bytes per worker and step, predicted = counted by the workers: "
              f"{sum(int(r['push_bytes']) == r['predicted_push'] for r in predicted)}/"
              f"{len(predicted)} runs"]
        if any(r["cpu_error"] is not None for r in predicted):
            md.append(f"- server CPU s per step (the busiest server), every run not fitted: "
                      f"{summary([r for r in predicted if r['role'] != 'calibration'], 'cpu_error')}")
        if by_role["held out (new sizes)"]:
            md.insert(8, f"- step time, held out, new sizes (beyond the fitted models): "
                         f"{summary(by_role['held out (new sizes)'])}")
            md.append(f"- server CPU s per step, new sizes: "
                      f"{summary(by_role['held out (new sizes)'], 'cpu_error')}")
        summary_lines = md[4:]
        md += ["", table(predicted), ""]
        if png:
            md += [f"![predicted against measured]({os.path.basename(png)})", ""]
        with open(os.path.join(out_dir, "validation.md"), "w") as f:
            f.write("\n".join(md))
        print("\n".join(summary_lines))
        if a.smoke and (len(predicted) != len(rows) or not by_role["calibration"]
                        or not by_role["held out"]):
            print("validate: FAIL: not every run was predicted, or a set is empty")
            return 1
        return 0
    finally:
        if a.smoke:
            shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
