"""--full, the measured run of the end-to-end benchmark (bench/README.md,
"End to end on shaped links"), in named phases: the matrix (both models x
1 and 10 Gbit/s x every configuration; steps.csv and the profile), the
headline pair again (paired.py), one worker's computation alone for the
compute floor (floor.py; worker_alone.csv), the transport probe
(transport.csv; transport() is also --transport's whole run), the scaling
sweep (scaling.py; scaling.csv), and summary.md from what they measured
(full_summary.py). A measurement that fails is logged and listed in the
summary, and the run goes on; full() returns 1 when one did.
"""
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas  # noqa: E402
import floor  # noqa: E402
import paired  # noqa: E402
import perf_profile  # noqa: E402
import report  # noqa: E402
import runs  # noqa: E402
import scaling  # noqa: E402
from configs import (BATCH, BLOCK, DDP_CONFIGS, DEMO_1G_EXTRA, LARGE_1G_EXTRA,  # noqa: E402
                     PROFILE_S, PROFILE_SKIP_S, PROFILE_STEPS, PS_CONFIGS, SMALL_BATCH,
                     SMALL_BATCH_DDP, SMALL_BATCH_PS, WORKERS, ddp_cfg, ps_cfg)
from full_summary import write_summary  # noqa: E402
from harness import attempt, log, torch_ready  # noqa: E402


def transport(h, results, sizes, rates, workers=(1,), servers=(1,), pushes=30):
    """The transport probe (runs.run_transport) for every worker count, link
    rate, server count and payload size; its rows, also in transport.csv."""
    rows = []
    for w in workers:
        for rate in rates:
            topo = h.topology(w, rate)
            for srv in servers:
                for n in sizes:
                    rows.append(runs.run_transport(topo, h.bins, h.logs("transport"), n,
                                                   pushes=pushes, limit_s=120,
                                                   servers=srv))
                    r = rows[-1]
                    log(f"transport {n} elements, W={w}, S={srv} @ {rate} Mbit/s: "
                        f"{r['mbit_per_s']} Mbit/s per link ({r['fraction_of_link']} of the "
                        f"link; lowest link {r['lowest_fraction']})")
    report.write_csv(os.path.join(results, "transport.csv"), rows)
    return rows


def environment_notes(a):
    """The summary's first notes, each logged: PyTorch missing (no DDP rows),
    the OpenBLAS kernels every process uses and, with PyTorch, their
    speed-up. Returns (notes, have_torch, OpenBLAS's directory for the DDP
    peers or None)."""
    have_torch = torch_ready()
    notes = []
    if not have_torch:
        notes.append("PyTorch (python3-torch) is missing: DDP rows skipped "
                     "(scripts/install-deps.sh --bench installs it)")
        log(notes[-1])
    notes.append(a.blas_line + "; every process of the run, ours and the peer's, uses them")
    blas_dir = None
    if have_torch:
        line = blas.speedup_note(a.blas_original)
        if line:
            notes.append(line)
            log(notes[-1])
        blas_dir = blas.OPENBLAS_DIR if os.path.isdir(blas.OPENBLAS_DIR) else None
    return notes, have_torch, blas_dir


def matrix(a):
    """The matrix's groups as (hidden, link Mbit/s, steps, eval every, global
    batch); time to accuracy on the demo MLP at 1 Gbit/s."""
    demo, large = a.demo_hidden, a.large_hidden
    return [(demo, 1000, a.demo_steps, 25, BATCH), (large, 1000, a.large_steps, 0, BATCH),
            (large, 1000, a.large_steps, 0, SMALL_BATCH),
            (demo, 10000, a.large_steps, 0, BATCH), (large, 10000, a.large_steps, 0, BATCH)]


def group_configs(a, hidden, rate, batch):
    """A group's parameter-server and DDP rows: the small-batch group's own,
    else PS_CONFIGS and DDP_CONFIGS with LARGE_1G_EXTRA for the large model
    at 1 Gbit/s; DEMO_1G_EXTRA for the demo model at 1 Gbit/s."""
    configs = [c + (BLOCK, (), ()) for c in PS_CONFIGS]
    ddp_configs = DDP_CONFIGS
    if batch == SMALL_BATCH:
        configs, ddp_configs = list(SMALL_BATCH_PS), SMALL_BATCH_DDP  # a copy: extended below
    elif hidden == a.large_hidden and rate == 1000:
        configs += LARGE_1G_EXTRA
    if hidden == a.demo_hidden and rate == 1000:
        configs += DEMO_1G_EXTRA
    return configs, ddp_configs


def log_row(group, name, row):
    log(f"{group} {name}: step {row['step_s']} s, busy link "
        f"{row['link_busy_share']}, acc {row.get('final_accuracy')}")


def run_ps_row(h, failures, topo, group, spec, config):
    """One parameter-server row of a group (spec: matrix()'s tuple), under
    perf where it is the large model's loco4-bf16 at 10 Gbit/s (PROFILE_S s
    of steady training; perf_10g_loco4.txt). Returns (row or None, whether a
    profile was taken, its report's lines)."""
    hidden, rate, steps, ev, batch = spec
    name, codec, bits, pull, block, worker_args, server_args = config
    prof = []
    start = None
    run_steps = steps
    if rate == 10000 and hidden == h.args.large_hidden and name == "loco4-bf16":
        run_steps = max(steps, PROFILE_STEPS)

        def start():
            prof.append(perf_profile.start(os.path.join(h.work, "perf.data"),
                                           PROFILE_S, PROFILE_SKIP_S))
            # The benchmark's own processes: everything in its namespaces.
            prof.append(perf_profile.ns_pids(topo))
    row = attempt(failures, f"{group} {name}", runs.run_ps, topo, h.bins, h.logs(group),
                  ps_cfg(name, codec, bits, pull, hidden, run_steps, ev, block=block,
                         worker_args=worker_args, server_args=server_args,
                         batch=batch),
                  limit_s=600, on_training=start)
    profiled, perf_lines = bool(prof and prof[0]), None
    if profiled:
        perf_lines = perf_profile.report(prof[0], os.path.join(h.work, "perf.data"),
                                         os.path.join(h.args.results, "perf_10g_loco4.txt"),
                                         prof[1])
    if row:
        log_row(group, name, row)
    return row, profiled, perf_lines


def run_ddp_rows(h, failures, topo, group, spec, ddp_configs, blas_dir):
    """A group's DDP rows (spec: matrix()'s tuple); the ones measured."""
    hidden, _, steps, ev, batch = spec
    rows = []
    for name, hook in ddp_configs:
        row = attempt(failures, f"{group} {name}", runs.run_ddp, topo, h.logs(group),
                      ddp_cfg(name, hook, hidden, steps, ev, batch=batch), limit_s=600,
                      blas_dir=blas_dir)
        if row:
            rows.append(row)
            log_row(group, name, row)
    return rows


def run_matrix(h, failures, have_torch, blas_dir):
    """Every group of the matrix on WORKERS workers: its parameter-server
    rows, then (with PyTorch) its DDP rows; steps.csv is rewritten after
    each group. Returns (rows, the profile's lines or None)."""
    rows, perf_lines = [], None
    for spec in matrix(h.args):
        hidden, rate, _, _, batch = spec
        topo = h.topology(WORKERS, rate)
        group = f"{runs.mlp_params(hidden) / 1e6:.2f}M-{rate}-b{batch}"
        configs, ddp_configs = group_configs(h.args, hidden, rate, batch)
        for config in configs:
            row, profiled, lines = run_ps_row(h, failures, topo, group, spec, config)
            if profiled:
                perf_lines = lines
            if row:
                rows.append(row)
        if have_torch:
            rows += run_ddp_rows(h, failures, topo, group, spec, ddp_configs, blas_dir)
        report.write_csv(os.path.join(h.args.results, "steps.csv"), rows)
    return rows, perf_lines


def run_pairs(h, failures, rows):
    """The headline pair again, alternating, so that its verdict does not
    rest on one row of each (paired.py): the matrix's pair, then
    --pair-repeats more, each fp32 PS then LoCo-4. Returns (pairs, their
    summary lines), the lines logged."""
    a = h.args
    by_name = {c[0]: c for c in SMALL_BATCH_PS}

    def run_pair_row(name, k):
        _, codec, bits, pull, block, worker_args, server_args = by_name[name]
        row = attempt(failures, f"pair {k} {name}", runs.run_ps, h.topology(WORKERS, 1000),
                      h.bins, h.logs(f"pair-{k}"),
                      ps_cfg(name, codec, bits, pull, a.large_hidden, a.large_steps, block=block,
                             worker_args=worker_args, server_args=server_args,
                             batch=SMALL_BATCH),
                      limit_s=600)
        if row:
            log(f"pair {k} {name}: step {row['step_s']} s")
        return row
    pairs = [paired.first_pair(rows, 10_000_000, 1000, SMALL_BATCH)]
    pairs += paired.run_repeats(run_pair_row, a.pair_repeats, first=2)
    pair_lines = paired.summary_lines(pairs)
    for line in pair_lines:
        log(line[2:])
    return pairs, pair_lines


def run_alone(h, failures):
    """One worker's computation and the servers' step, each alone, for the
    compute floor of the large model's delta rows: nothing else runs while
    they are timed (worker_alone.csv). Returns {(batch per worker, return
    bits): what floor.measure read}."""
    alone, alone_rows = {}, []
    for per_worker in sorted({BATCH // WORKERS, SMALL_BATCH // WORKERS}):
        for _, bits in floor.DELTA_ROWS:
            got = attempt(failures, f"worker alone, batch {per_worker}, {bits}-bit return",
                          floor.measure, h.bins["loco-bench-cpu-step"], h.args.large_hidden,
                          per_worker, bits, WORKERS)
            if got:
                alone[(per_worker, bits)] = got
                alone_rows.append({"batch_per_worker": per_worker, "pull_bits": bits, **got})
                log(f"worker alone, batch {per_worker}, {bits}-bit return: {got}")
    report.write_csv(os.path.join(h.args.results, "worker_alone.csv"), alone_rows)
    return alone


def run_scaling(h, failures):
    """The servers' time per step against W, S and the model's size, each
    point in a cluster on 10 Gbit/s links and alone (scaling.py;
    scaling.csv). Returns (rows, {(params, W, S): the point alone})."""
    a = h.args
    scale_rows, scale_alone = [], {}
    for hidden in scaling.model_sizes(a.demo_hidden, a.large_hidden):
        for w, s in scaling.POINTS:
            topo = h.topology(w, 10000)
            what = f"scaling {runs.mlp_params(hidden) / 1e6:.1f}M W={w} S={s}"
            row = attempt(failures, what, runs.run_ps, topo, h.bins,
                          h.logs(f"scale-{runs.mlp_params(hidden)}-w{w}-s{s}"),
                          ps_cfg("loco4-delta", "loco", 4, "delta", hidden, scaling.STEPS,
                                 servers=s), limit_s=600)
            if not row:
                continue
            scale_rows.append(row)
            got = attempt(failures, f"{what} alone", scaling.measure_alone,
                          h.bins["loco-bench-cpu-step"], hidden, w, s, BATCH)
            if got:
                scale_alone[(row["params"], w, s)] = got
                row["server_alone_s"] = round(scaling.per_shard_alone(got, s), 5)
            log(f"{what}: step {row['step_s']} s, server compute "
                f"{row.get('server_compute_s')} s/step, alone {row.get('server_alone_s')} s")
    report.write_csv(os.path.join(a.results, "scaling.csv"), scale_rows)
    return scale_rows, scale_alone


def full(h):
    """--full: every phase in turn on one Harness, then summary.md; returns 1
    when a measurement failed (listed in the summary), else 0."""
    a = h.args
    os.makedirs(a.results, exist_ok=True)
    t0 = time.monotonic()
    notes, have_torch, blas_dir = environment_notes(a)
    failures = []
    m = types.SimpleNamespace()
    m.rows, m.perf_lines = run_matrix(h, failures, have_torch, blas_dir)
    m.pairs, m.pair_lines = run_pairs(h, failures, m.rows)
    m.alone = run_alone(h, failures)
    m.transport = attempt(failures, "transport", transport, h, a.results, a.transport_elements,
                          [1000, 10000], a.transport_workers, a.transport_servers,
                          a.transport_pushes) or []
    m.scale_rows, m.scale_alone = run_scaling(h, failures)
    h.close()
    write_summary(h, t0, notes, failures, m)
    log(f"done in {time.monotonic() - t0:.0f} s: {a.results}/summary.md")
    return 1 if failures else 0
