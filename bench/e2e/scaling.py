"""How a server's time per step grows with the workers, the shards and the
model: the measured run's scaling sweep.

Each point (model, W workers, S shards) is measured twice:
- in a cluster on 10 Gbit/s links (runs.run_ps, the service's default
  8-bit delta return): the slowest shard's decode+average and AdamW per
  step, from the servers' own /metrics. That is wall time, and on a
  machine where W workers and S servers share a few cores it includes
  waiting for a core;
- alone (loco-bench-cpu-step, floor.measure): what the servers compute for
  one step of every shard from W payloads on one thread, nothing else
  running, divided by S: one shard's CPU time per step.
table() and plot() put the two side by side: their ratio is what the
sharing of cores costs, the alone figure what the server's code costs.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floor  # noqa: E402
import report  # noqa: E402

# (W, S) of the sweep: W = 1..8 with 2 shards, then 1 and 4 shards with 4
# workers (W = 4, S = 2 is shared).
POINTS = ((1, 2), (2, 2), (4, 2), (8, 2), (4, 1), (4, 4))
# The service's default return: 8-bit deltas (loco-server --pull-bits).
PULL_BITS = 8
# Steps per cluster point, and repetitions of the alone measurement.
STEPS, ALONE_REPS = 10, 5


def model_sizes(demo, large):
    """The sweep's hidden-layer lists: the demo model, one halfway between
    it and the large one layer by layer (when they have as many layers),
    and the large model; without repeats, smallest first."""
    sizes = [list(demo)]
    if len(demo) == len(large):
        sizes.append([(d + l) // 2 for d, l in zip(demo, large)])
    sizes.append(list(large))
    out = []
    for s in sizes:
        if s not in out:
            out.append(s)
    return out


def per_shard_alone(alone, shards):
    """One shard's share of the servers' step measured alone (floor.measure's
    "server" covers every shard on one thread; the shards are equal to
    within a block)."""
    return alone["server"] / shards


def measure_alone(binary, hidden, workers, shards, global_batch):
    """floor.measure for one point: each worker's share of the global batch,
    the default return's code width, W payloads, S shards."""
    return floor.measure(binary, hidden, global_batch // workers, PULL_BITS, workers,
                         shards=shards, reps=ALONE_REPS)


def table(rows, alone):
    """Markdown table, one line per cluster row (runs.run_ps rows with
    params, workers, servers, step_s, server_compute_s, server_peak_rss_mb)
    in the order given. `alone`: {(params, W, S): floor.measure() result}."""
    out = ["| params | workers | servers | step s | server step in the cluster, "
           "slowest shard, s | server step alone, one shard, s | cluster / alone | "
           "server RSS MB |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        a = alone.get((r["params"], r["workers"], r["servers"]))
        one = per_shard_alone(a, r["servers"]) if a else None
        cluster = r.get("server_compute_s")
        ratio = f"{cluster / one:.2f}" if cluster and one else "–"
        out.append(f"| {report._params(r['params'])} | {r['workers']} | {r['servers']} | "
                   f"{report._fmt(r.get('step_s'))} | {report._fmt(cluster)} | "
                   f"{report._fmt(one)} | {ratio} | "
                   f"{report._fmt(r.get('server_peak_rss_mb'))} |")
    return "\n".join(out)


def series(rows, alone, vary):
    """Plot data: {params: [(x, cluster s, alone s)]} where x is W (vary =
    "workers", the S = 2 points) or S (vary = "servers", the W = 4 points),
    sorted by x; a missing figure is None."""
    fixed = ("servers", 2) if vary == "workers" else ("workers", 4)
    out = {}
    for r in rows:
        if r[fixed[0]] != fixed[1]:
            continue
        a = alone.get((r["params"], r["workers"], r["servers"]))
        out.setdefault(r["params"], []).append(
            (r[vary], r.get("server_compute_s"),
             per_shard_alone(a, r["servers"]) if a else None))
    return {n: sorted(points) for n, points in out.items()}


def series_by_model(rows, alone, workers=4, servers=2):
    """Plot data for the model-size panel: [(params, cluster s, alone s)] of
    the (workers, servers) points, sorted by params."""
    out = []
    for r in rows:
        if (r["workers"], r["servers"]) != (workers, servers):
            continue
        a = alone.get((r["params"], workers, servers))
        out.append((r["params"], r.get("server_compute_s"),
                    per_shard_alone(a, servers) if a else None))
    return sorted(out)


def plot(results_dir, rows, alone):
    """scaling.png: one shard's server time per step against W (S = 2, left),
    against S (W = 4, middle), in the cluster (solid) and alone (dashed),
    one colour per model, and against the model's size (W = 4, S = 2,
    right). None without gnuplot or rows."""
    if not shutil.which("gnuplot") or not rows:
        return None
    panels = []
    for vary, xlabel, title in (("workers", "workers W (2 shards)", "against the workers"),
                                ("servers", "shards S (4 workers)", "against the shards")):
        data = series(rows, alone, vary)
        dat = os.path.join(results_dir, f"scaling_{vary}.dat")
        with open(dat, "w") as f:
            for n in sorted(data):
                f.write(f"# {report._params(n)}\n")
                for x, cluster, one in data[n]:
                    f.write(f"{x} {cluster if cluster else 'NaN'} {one if one else 'NaN'}\n")
                f.write("\n\n")
        plots = []
        for k, n in enumerate(sorted(data)):
            plots.append(f"'{dat}' index {k} using 1:2 with linespoints lc {k + 1} lw 2 "
                         f"title '{report._params(n)} in the cluster'")
            plots.append(f"'{dat}' index {k} using 1:3 with linespoints lc {k + 1} dt 2 "
                         f"title '{report._params(n)} alone'")
        xs = sorted({p[0] for points in data.values() for p in points})
        panels.append(f"set title 'Server step per shard, {title}'\nset xlabel '{xlabel}'\n"
                      f"set xtics ({', '.join(str(x) for x in xs)})\n"
                      f"set xrange [{min(xs or [1]) * 0.8:g}:{max(xs or [1]) * 1.25:g}]\n"
                      f"plot {', '.join(plots)}\n")
    by_model = series_by_model(rows, alone)
    dat = os.path.join(results_dir, "scaling_params.dat")
    with open(dat, "w") as f:
        for n, cluster, one in by_model:
            f.write(f"{n / 1e6:.3f} {cluster if cluster else 'NaN'} {one if one else 'NaN'}\n")
    panels.append("set title 'Server step per shard, against the model'\n"
                  "set xlabel 'parameters, millions (4 workers, 2 shards)'\n"
                  "unset logscale x\nset xtics autofreq\nset xrange [0:*]\n"
                  f"plot '{dat}' using 1:2 with linespoints lc 7 lw 2 title 'in the cluster', "
                  f"'{dat}' using 1:3 with linespoints lc 7 dt 2 title 'alone'\n")
    png = os.path.join(results_dir, "scaling.png")
    script = (f"set terminal pngcairo size 1500,480\nset output '{png}'\n"
              "set multiplot layout 1,3\nset logscale y\nset logscale x 2\nset grid ytics\n"
              "set ylabel 'seconds per step (log)'\nset key top left font ',9'\n"
              + "".join(panels) + "unset multiplot\n")
    report.run_gnuplot(script)
    return png
