#!/usr/bin/env python3
"""Collects the traces of bench/convergence/run.sh into CSVs, a table and checks.

Subcommands (all paths explicit; no state of its own):
  run RUN_TRACE_DIR OUT_PREFIX
      Averages the per-worker step losses (worker-*.csv, one row per worker
      and step) into OUT_PREFIX.csv (step,loss,loss_ema,workers) and copies the
      evaluations (*-eval.csv, written by the evaluating rank) into
      OUT_PREFIX-eval.csv.
  check OUT_PREFIX...
      Quick-mode bar: for every run, the mean loss of the last quarter of the
      steps must be below the mean of the first quarter; exits 1 otherwise.
  table TITLE OUT_PREFIX... > table.md
      Markdown table: run, final train loss (mean of the last 10% of steps),
      final evaluation loss and accuracy, and the difference to the first run.
  readme README MARKER TABLE_MD
      Replaces the text between <!-- MARKER:begin --> and <!-- MARKER:end -->
      in README with the contents of TABLE_MD.
"""
import csv
import glob
import os
import sys


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def collect_run(trace_dir, prefix):
    by_step = {}
    for path in sorted(glob.glob(os.path.join(trace_dir, "worker-*.csv"))):
        if path.endswith("-eval.csv"):
            continue
        for row in read_rows(path):
            by_step.setdefault(int(row["step"]), []).append(float(row["loss"]))
    if not by_step:
        sys.exit(f"collect: no step traces in {trace_dir}")
    with open(prefix + ".csv", "w") as f:
        # loss_ema: exponential moving average (weight 0.95 on the past) for the plot.
        f.write("step,loss,loss_ema,workers\n")
        ema = None
        for step in sorted(by_step):
            losses = by_step[step]
            mean = sum(losses) / len(losses)
            ema = mean if ema is None else 0.95 * ema + 0.05 * mean
            f.write(f"{step},{mean:.6f},{ema:.6f},{len(losses)}\n")
    evals = {}
    for path in sorted(glob.glob(os.path.join(trace_dir, "worker-*-eval.csv"))):
        for row in read_rows(path):
            evals[int(row["step"])] = row
    with open(prefix + "-eval.csv", "w") as f:
        f.write("step,epoch,accuracy,loss\n")
        for step in sorted(evals):
            r = evals[step]
            f.write(f"{step},{r['epoch']},{float(r['accuracy']):.6f},{float(r['loss']):.6f}\n")


def losses(prefix):
    return [float(r["loss"]) for r in read_rows(prefix + ".csv")]


def check(prefixes):
    failed = 0
    for p in prefixes:
        ls = losses(p)
        q = max(1, len(ls) // 4)
        first, last = sum(ls[:q]) / q, sum(ls[-q:]) / q
        ok = len(ls) >= 4 and last < first
        print(f"{os.path.basename(p):>10}: steps {len(ls):4d}  first-quarter loss {first:.4f}  "
              f"last-quarter loss {last:.4f}  {'ok' if ok else 'FAIL (loss did not decrease)'}")
        failed += not ok
    if failed:
        sys.exit(f"check: {failed} run(s) did not reduce the loss")


def final_eval(prefix):
    rows = read_rows(prefix + "-eval.csv")
    return rows[-1] if rows else None


def table(title, prefixes):
    base = None
    print(f"| {title} | final train loss | final eval loss | Δ eval loss vs first row | "
          f"eval accuracy | Δ accuracy (points) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for p in prefixes:
        ls = losses(p)
        k = max(1, len(ls) // 10)
        train = sum(ls[-k:]) / k
        ev = final_eval(p)
        if ev is None:
            print(f"| {os.path.basename(p)} | {train:.4f} | n/a | | n/a | |")
            continue
        loss, acc = float(ev["loss"]), float(ev["accuracy"])
        if base is None:
            base = (loss, acc)
        dl = 100.0 * (loss - base[0]) / base[0]
        da = 100.0 * (acc - base[1])
        print(f"| {os.path.basename(p)} | {train:.4f} | {loss:.4f} | {dl:+.2f}% | "
              f"{100 * acc:.2f}% | {da:+.2f} |")


def readme(path, marker, table_md):
    text = open(path).read()
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    if begin not in text or end not in text:
        sys.exit(f"readme: markers {begin} / {end} not found in {path}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    body = open(table_md).read()
    with open(path, "w") as f:
        f.write(head + begin + "\n" + body.rstrip("\n") + "\n" + end + tail)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "run" and len(args) == 2:
        collect_run(*args)
    elif cmd == "check" and args:
        check(args)
    elif cmd == "table" and len(args) >= 2:
        table(args[0], args[1:])
    elif cmd == "readme" and len(args) == 3:
        readme(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
