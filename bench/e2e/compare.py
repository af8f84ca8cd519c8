"""--compare: one configuration of the measured run with two builds, A
(--build-dir) and B (--against-build-dir), alternated on the same shaped
links, so that a change is judged by a ratio measured in one run.

On a shared 2-core machine the same configuration's median step moves by
10-20 % between runs minutes apart; single runs before and after a change
cannot settle a 5 % effect. Alternating A and B in the order A B B A A B ...
(each pair reversed, so that a drift over the run weighs on both sides
alike) and comparing medians of the runs' medians can. The summary gives,
per build, each run's median step, computing and exposed-communication
time and the CPU it took per step, and B / A of their medians.

Everything the comparison needs is pure below (summarize, markdown); run()
drives the runs.
"""
import os
import statistics
import time

import report
import runs


# What a comparison reads from each run's row (runs.run_ps), and how the
# summary names it.
FIELDS = (("step_s", "step s"), ("compute_s", "compute s"), ("exposed_comm_s", "exposed comm s"),
          ("cpu_s_per_step", "CPU s per step"))


def order(repeat):
    """The builds' order: pairs A B, B A, A B, ...; 2 * repeat runs."""
    out = []
    for k in range(repeat):
        out += ["A", "B"] if k % 2 == 0 else ["B", "A"]
    return out


def cpu_per_step(row, cores):
    """CPU seconds the run's processes took per step: their busy share of
    the machine's cores over the steady window times the step."""
    busy, step = row.get("cpu_busy_share"), row.get("step_s")
    if busy is None or not step:
        return None
    return round(busy * cores * step, 4)


def summarize(rows):
    """rows: {"A": [row, ...], "B": [...]} with FIELDS' keys. Returns
    {field: {"A": median, "B": median, "ratio": B / A or None, "A_runs": [...],
    "B_runs": [...]}}; a field a run did not measure is left out of its
    median (None when no run measured it)."""
    out = {}
    for key, _ in FIELDS:
        entry = {}
        for side in ("A", "B"):
            vals = [r[key] for r in rows[side] if r.get(key) is not None]
            entry[f"{side}_runs"] = vals
            entry[side] = statistics.median(vals) if vals else None
        entry["ratio"] = (round(entry["B"] / entry["A"], 3)
                          if entry["A"] and entry["B"] is not None else None)
        out[key] = entry
    return out


def markdown(name, args_line, sides, summary, blas_line=""):
    """The summary as markdown: the command, the builds, one row per field."""
    lines = [f"# Comparison: {name}", "", f"Command: `{args_line}`", ""]
    if blas_line:
        lines += [f"OpenBLAS: {blas_line}", ""]
    for side, where in sides.items():
        lines.append(f"- {side}: `{where}`")
    lines += ["", "| field | A runs | B runs | A median | B median | B / A |",
              "| --- | --- | --- | --- | --- | --- |"]
    for key, label in FIELDS:
        e = summary[key]
        runs_of = lambda s: ", ".join(f"{v:.4g}" for v in e[f"{s}_runs"]) or "–"  # noqa: E731
        med = lambda s: f"{e[s]:.4g}" if e[s] is not None else "–"  # noqa: E731
        ratio = f"{e['ratio']:.3f}" if e["ratio"] is not None else "–"
        lines.append(f"| {label} | {runs_of('A')} | {runs_of('B')} | {med('A')} | {med('B')} "
                     f"| {ratio} |")
    return "\n".join(lines) + "\n"


def run(h, cfg, against_bins, against_dir, rate, repeat, results, args_line, blas_line, log,
        limit_s=600):
    """Runs cfg with h.bins (A, from h.args.build_dir) and against_bins (B,
    from against_dir), alternated; writes compare-<name>.md and .csv under
    `results` and returns the summary. A run that fails raises RuntimeError
    (its processes are stopped)."""
    topo = h.topology(h.args.workers, rate)
    bins = {"A": h.bins, "B": against_bins}
    rows = {"A": [], "B": []}
    flat = []
    t0 = time.monotonic()
    cores = os.cpu_count() or 1
    for k, side in enumerate(order(repeat)):
        c = dict(cfg, name=f"{cfg['name']}-{side}{k}")
        row = runs.run_ps(topo, bins[side], h.logs(f"compare-{side}{k}"), c, limit_s)
        row["build"] = side
        row["cpu_s_per_step"] = cpu_per_step(row, cores)
        rows[side].append(row)
        flat.append(row)
        log(f"compare {side} run {k}: step {row['step_s']} s, compute {row.get('compute_s')} s, "
            f"CPU {row['cpu_s_per_step']} s per step")
    summary = summarize(rows)
    os.makedirs(results, exist_ok=True)
    sides = {"A": h.args.build_dir, "B": against_dir}
    text = markdown(cfg["name"], args_line, sides, summary, blas_line)
    base = os.path.join(results, f"compare-{cfg['name']}")
    with open(base + ".md", "w") as f:
        f.write(text)
    report.write_csv(base + ".csv", flat)
    print(text, flush=True)
    log(f"comparison took {time.monotonic() - t0:.0f} s; written to {base}.md")
    return summary
