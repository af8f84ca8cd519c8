#!/usr/bin/python3
"""End-to-end benchmark driver (run through bench/e2e/run.sh, which owns the
namespace prefix and the EXIT trap). Modes:

  --quick      <= 60 s smoke test: tiny MLP, 2 workers, 1 server, a few steps
               of LoCo-4 and fp32 on a 100 Mbit/s link; fails unless step times
               and bytes (worker counters and veth counters) were measured,
               LoCo-4 pushed fewer bytes than fp32, and no namespace is left.
  --full       the measured run (bench/README.md, "End to end on shaped
               links"): both models x 1 and 10 Gbit/s x every configuration,
               the headline pair again --pair-repeats times (paired.py), the
               transport probe, scaling in W and S, memory, a profile.
  --transport  only the transport probe (payload throughput vs the link).
  --tcp-cost   only the CPU that one TCP stream of --tcp-mib MiB costs both
               ends, unshaped and at 1 and 10 Gbit/s (tcp_cost.py).
  --compare NAME
               one configuration of the measured run (large model unless
               --large-hidden says otherwise) with two builds, --build-dir (A)
               and --against-build-dir (B), alternated --repeat times each on
               the same links; B / A of the medians (compare.py).
  --torch      the same torch MLP under DDP/gloo fp32 and through LoCo-PS LoCo-4
               (loco_ps.torch.DistributedOptimizer), W=4 on 1 Gbit/s links, and
               the C++ loco-worker on the same cluster: step times, the ratio,
               the Python layer's cost (torch_bench.py).
  --torch-quick
               its smoke test: a tiny model, 2 workers, a few steps.
  --torch-overhead
               the Python layer's cost alone: --torch's torch and loco-worker
               pairs with W=1 (--torch-overhead-workers) and 1 server, so that
               the worker has a core to itself, in alternating rounds
               (torch_overhead.py).
  --cleanup    remove every namespace this harness could have left (all
               prefixes), killing the processes inside; with --prefix, only
               that run's.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas  # noqa: E402
import compare  # noqa: E402
import floor  # noqa: E402
import memory  # noqa: E402
import netns  # noqa: E402
import paired  # noqa: E402
import perf_profile  # noqa: E402
import report  # noqa: E402
import runs  # noqa: E402
import scaling  # noqa: E402
import tcp_cost  # noqa: E402
import torch_bench  # noqa: E402
import torch_overhead  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BINARIES = ("loco-coordinator", "loco-server", "loco-worker", "loco-bench-e2e-transport",
            "loco-bench-cpu-step")
# Workers of every configuration of the measured run's matrix.
WORKERS = 4
PS_CONFIGS = [("loco4-bf16", "loco", 4, "bf16"), ("loco4-delta", "loco", 4, "delta"),
              ("fp32-ps", "fp32", 4, "fp32")]
# The workers' default quantization block (WorkerOptions::block_size).
BLOCK = 256
# (name, codec, bits, pull, block, worker args, server args).
# 4-bit codes for the return delta instead of 8: half the download. On the
# demo model too, where its accuracy is measured.
PULL4 = ("loco4-delta-pull4", "loco", 4, "delta", BLOCK, (), ("--pull-bits", 4))
DEMO_1G_EXTRA = [PULL4]
# Only where the targets are judged (large model, 1 Gbit/s): 128-element
# blocks, the earlier default, double the scales' share of the bytes
# (0.125 + 4/128 instead of 4/256). The last row measures the overlap of
# pushes and pulls with the backward pass by turning it off.
LARGE_1G_EXTRA = [("loco4-delta-b128", "loco", 4, "delta", 128, (), ()), PULL4,
                  ("loco4-delta-no-overlap", "loco", 4, "delta", BLOCK,
                   ("--overlap-backward=false",), ()),
                  # The server's memory levers, each turned back: gRPC's
                  # adaptive flow-control window, and one unary Push per
                  # shard instead of a stream of 256 KiB chunks.
                  ("loco4-bf16-adaptive-window", "loco", 4, "bf16", BLOCK, (),
                   ("--stream-window-kb", 0)),
                  ("loco4-bf16-unary-push", "loco", 4, "bf16", BLOCK,
                   ("--push-chunk-bytes=0",), ())]
DDP_CONFIGS = [("ddp-fp32", "fp32"), ("ddp-fp16", "fp16"), ("ddp-powersgd", "powersgd")]
# The profile of the measured run (10 Gbit/s, large model, loco4-bf16):
# PROFILE_S seconds of perf from PROFILE_SKIP_S after training starts, on a
# run of at least PROFILE_STEPS steps, so that the window holds steady
# training only (a 20-step run there lasts about 7 s: an 8-s window from
# its start also took in its end and the processes' exit).
PROFILE_S, PROFILE_SKIP_S, PROFILE_STEPS = 8, 2, 60
# The global batch of every row but the small-batch group below.
BATCH = 256
# The large model at 1 Gbit/s once more with a quarter of the batch (16 per
# worker): on 2 cores shared by 4 workers and 2 servers, the batch-256
# computation is half of a LoCo step; here communication dominates the
# step, as on a node with a device per worker. The targets are judged for
# both groups.
SMALL_BATCH = 64
SMALL_BATCH_PS = [("loco4-delta", "loco", 4, "delta", BLOCK, (), ()), PULL4,
                  ("fp32-ps", "fp32", 4, "fp32", BLOCK, (), ())]
SMALL_BATCH_DDP = [("ddp-fp32", "fp32")]


def log(msg):
    print(f"e2e: {msg}", flush=True)


def cleanup_everything():
    """--cleanup without a prefix: every namespace named like ours."""
    names = [ln.split()[0] for ln in netns.sh("ip", "netns", "list", check=False).splitlines()
             if ln.strip()]
    prefixes = sorted({m.group(1) for n in names if (m := re.match(r"^(le\d+)-(srv|w\d+)$", n))})
    left = []
    for p in prefixes:
        left += netns.cleanup(p)
    return prefixes, left


def torch_ready():
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
    return r.returncode == 0


def attempt(failures, what, fn, *args, **kwargs):
    """Runs one measurement; a failure is logged and listed in the summary
    (its processes are already stopped) and the run goes on."""
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        failures.append(f"{what}: {first}")
        log(f"FAILED {what}: {e}")
        return None


def ps_cfg(name, codec, bits, pull, hidden, steps, eval_every=0, servers=2, target=0.80,
           block=BLOCK, worker_args=(), server_args=(), batch=BATCH):
    return {"name": name, "codec": codec, "bits": bits, "pull": pull, "hidden": hidden,
            "block": block, "worker_args": list(worker_args), "server_args": list(server_args),
            "servers": servers, "steps": steps, "batch": batch, "lr": 1e-3,
            "eval_every": eval_every, "target": target, "warmup": 2}


def ddp_cfg(name, hook, hidden, steps, eval_every=0, target=0.80, batch=BATCH):
    return {"name": name, "hook": hook, "hidden": hidden, "steps": steps, "batch": batch,
            "lr": 1e-3, "eval_every": eval_every, "target": target, "warmup": 2}


def named_configs():
    """Every parameter-server configuration of the measured run by name, as
    (name, codec, bits, pull, block, worker args, server args)."""
    out = {}
    for c in PS_CONFIGS:
        out[c[0]] = c + (BLOCK, (), ())
    for c in DEMO_1G_EXTRA + LARGE_1G_EXTRA + SMALL_BATCH_PS:
        out.setdefault(c[0], c)
    return out


def binaries(build_dir):
    """BINARIES in build_dir/bin by name; SystemExit naming the missing ones
    and the command that builds them."""
    bins = {b: os.path.join(build_dir, "bin", b) for b in BINARIES}
    missing = [p for p in bins.values() if not os.access(p, os.X_OK)]
    if missing:
        raise SystemExit(f"e2e: missing {', '.join(missing)}: build them first (cmake "
                         f"--build {build_dir} --target {' '.join(BINARIES)})")
    return bins


class Harness:
    def __init__(self, args):
        self.args = args
        self.bins = binaries(args.build_dir)
        self.work = tempfile.mkdtemp(prefix="loco-e2e.")
        self.topo = None

    def topology(self, workers, rate_mbit):
        if self.topo is None or self.topo.workers != workers:
            if self.topo:
                left = self.topo.destroy()
                if left:
                    raise RuntimeError(f"namespaces left behind: {left}")
            self.topo = netns.Topology(self.args.prefix, workers)
            try:
                self.topo.create()
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                raise RuntimeError(f"cannot create the network namespaces and veth links "
                                   f"(needs root, iproute2 and a kernel with netns/veth): {e}")
        if rate_mbit:
            self.topo.shape(rate_mbit)
        else:
            self.topo.unshape()
        return self.topo

    def logs(self, group):
        d = os.path.join(self.work, group)
        os.makedirs(d, exist_ok=True)
        return d

    def close(self):
        left = netns.cleanup(self.args.prefix)
        if left:
            log(f"WARNING: namespaces left behind: {left}")
        return left


def quick(h):
    """The ctest smoke run; returns an exit code."""
    t0 = time.monotonic()
    topo = h.topology(2, 100)
    rows = []
    for name, codec, bits, pull in (PS_CONFIGS[0], PS_CONFIGS[2]):
        cfg = ps_cfg(name, codec, bits, pull, [64], steps=12, servers=1)
        rows.append(runs.run_ps(topo, h.bins, h.logs("quick"), cfg, limit_s=40))
        log(f"{name}: step {rows[-1]['step_s']} s, push {rows[-1]['push_bytes_per_step']} B/step,"
            f" veth up {rows[-1]['veth_up_bytes_per_step']} B/step")
    left = h.close()
    problems = []
    for r in rows:
        if not r["step_s"] or r["step_s"] <= 0:
            problems.append(f"{r['config']}: no step time measured")
        if not r["push_bytes_per_step"]:
            problems.append(f"{r['config']}: the workers counted no pushed bytes")
        # Independent check: over the run, the link carried at least what
        # the workers counted as payload (plus headers) in the push direction.
        if r["veth_total_up_bytes_per_step"] < r["push_bytes_per_step"]:
            problems.append(f"{r['config']}: veth up {r['veth_total_up_bytes_per_step']} B/step "
                            f"< counted push {r['push_bytes_per_step']} B/step")
        if r["veth_up_bytes_per_step"] is None or r["veth_down_bytes_per_step"] is None:
            problems.append(f"{r['config']}: no steady-state veth counter samples")
        if not r["worker_peak_rss_mb"]:
            problems.append(f"{r['config']}: no peak RSS recorded")
        if r.get("compute_s") is None or r["compute_s"] < 0 or r["exposed_comm_s"] < 0:
            problems.append(f"{r['config']}: no step phases (compute {r.get('compute_s')}, "
                            f"exposed communication {r.get('exposed_comm_s')})")
    loco, fp32 = rows
    if loco["push_bytes_per_step"] >= fp32["push_bytes_per_step"] * 0.2:
        problems.append(f"LoCo-4 pushed {loco['push_bytes_per_step']} B/step, fp32 "
                        f"{fp32['push_bytes_per_step']}: expected < 0.2x")
    if left:
        problems.append(f"namespaces left behind: {left}")
    report.write_csv(os.path.join(h.work, "quick.csv"), rows)
    log(f"quick run took {time.monotonic() - t0:.1f} s")
    for p in problems:
        log(f"FAIL: {p}")
    return 1 if problems else 0


def transport(h, results, sizes, rates, workers=(1,), servers=(1,), pushes=30):
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


def full(h):
    a = h.args
    results = a.results
    os.makedirs(results, exist_ok=True)
    t0 = time.monotonic()
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

    rows, failures = [], []
    # (hidden, link Mbit/s, steps, eval every): time to accuracy on the demo MLP at 1 Gbit/s.
    demo, large = a.demo_hidden, a.large_hidden
    matrix = [(demo, 1000, a.demo_steps, 25, BATCH), (large, 1000, a.large_steps, 0, BATCH),
              (large, 1000, a.large_steps, 0, SMALL_BATCH),
              (demo, 10000, a.large_steps, 0, BATCH), (large, 10000, a.large_steps, 0, BATCH)]
    perf_lines = None
    for hidden, rate, steps, ev, batch in matrix:
        topo = h.topology(WORKERS, rate)
        group = f"{runs.mlp_params(hidden) / 1e6:.2f}M-{rate}-b{batch}"
        configs = [c + (BLOCK, (), ()) for c in PS_CONFIGS]
        ddp_configs = DDP_CONFIGS
        if batch == SMALL_BATCH:
            configs, ddp_configs = SMALL_BATCH_PS, SMALL_BATCH_DDP
        elif hidden == large and rate == 1000:
            configs += LARGE_1G_EXTRA
        if hidden == demo and rate == 1000:
            configs += DEMO_1G_EXTRA
        for name, codec, bits, pull, block, worker_args, server_args in configs:
            prof = []
            start = None
            run_steps = steps
            if rate == 10000 and hidden == large and name == "loco4-bf16":
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
            if prof and prof[0]:
                perf_lines = perf_profile.report(prof[0], os.path.join(h.work, "perf.data"),
                                            os.path.join(results, "perf_10g_loco4.txt"),
                                            prof[1])
            if row:
                rows.append(row)
                log(f"{group} {name}: step {row['step_s']} s, busy link "
                    f"{row['link_busy_share']}, acc {row.get('final_accuracy')}")
        if have_torch:
            for name, hook in ddp_configs:
                row = attempt(failures, f"{group} {name}", runs.run_ddp, topo, h.logs(group),
                              ddp_cfg(name, hook, hidden, steps, ev, batch=batch), limit_s=600,
                              blas_dir=blas_dir)
                if row:
                    rows.append(row)
                    log(f"{group} {name}: step {row['step_s']} s, busy link "
                        f"{row['link_busy_share']}, acc {row.get('final_accuracy')}")
        report.write_csv(os.path.join(results, "steps.csv"), rows)

    # The headline pair again, alternating, so that its verdict does not
    # rest on one row of each (paired.py).
    by_name = {c[0]: c for c in SMALL_BATCH_PS}

    def run_pair_row(name, k):
        _, codec, bits, pull, block, worker_args, server_args = by_name[name]
        row = attempt(failures, f"pair {k} {name}", runs.run_ps, h.topology(WORKERS, 1000),
                      h.bins, h.logs(f"pair-{k}"),
                      ps_cfg(name, codec, bits, pull, large, a.large_steps, block=block,
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

    # One worker's computation and the servers' step, each alone, for the
    # compute floor of the large model's delta rows: nothing else runs
    # while they are timed.
    alone, alone_rows = {}, []
    for per_worker in sorted({BATCH // WORKERS, SMALL_BATCH // WORKERS}):
        for _, bits in floor.DELTA_ROWS:
            got = attempt(failures, f"worker alone, batch {per_worker}, {bits}-bit return",
                          floor.measure, h.bins["loco-bench-cpu-step"], large, per_worker, bits,
                          WORKERS)
            if got:
                alone[(per_worker, bits)] = got
                alone_rows.append({"batch_per_worker": per_worker, "pull_bits": bits, **got})
                log(f"worker alone, batch {per_worker}, {bits}-bit return: {got}")
    report.write_csv(os.path.join(results, "worker_alone.csv"), alone_rows)

    tr = attempt(failures, "transport", transport, h, results, a.transport_elements,
                 [1000, 10000], a.transport_workers, a.transport_servers,
                 a.transport_pushes) or []

    # The servers' time per step against W, S and the model's size, each
    # point in a cluster and alone (scaling.py).
    scale_rows, scale_alone = [], {}
    for hidden in scaling.model_sizes(demo, large):
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
    report.write_csv(os.path.join(results, "scaling.csv"), scale_rows)
    h.close()

    png = report.plot(results, rows)
    ratio_md, verdicts = report.ratios(rows, os.cpu_count() or 1)
    mem = memory.bound_lines(rows, BATCH)
    md = ["# End-to-end results", "",
          f"Run: `bench/e2e/run.sh --full` on {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{time.monotonic() - t0:.0f} s.", ""]
    md += [f"- {n}" for n in notes] + [f"- FAILED: {f}" for f in failures] + [""]
    md += ["## Step time, bytes, accuracy, memory", "", report.steps_table(rows), "",
           "## Ratios (one run)", "", ratio_md, "", "Targets:", ""] + verdicts + [""]
    md += [f"## The headline ratio in {len(pairs)} alternating pairs", "",
           f"{paired.LOCO} against {paired.FP32}, large model, 1 Gbit/s, global batch "
           f"{SMALL_BATCH}: the matrix's pair, then {a.pair_repeats} more, each fp32 PS "
           "then LoCo-4 on fresh links (paired.py).", ""] + pair_lines + [""]
    floor_md = floor.floor_lines(rows, alone, os.cpu_count() or 1)
    if floor_md:
        md += ["## The compute floor (large model, 1 Gbit/s, delta return)", "",
               f"What the step's computation alone takes on this machine's "
               f"{os.cpu_count()} cores: {WORKERS} workers' forward and backward, "
               "compression and delta apply, plus the servers' step of every shard "
               f"(the {WORKERS} payloads decoded into AdamW, the return delta encoded), "
               "each timed alone (`loco-bench-cpu-step`, `worker_alone.csv`), divided by "
               "the cores. No step of that row can be shorter, however well "
               "communication overlaps it; floor / fp32 PS is the best LoCo-4 / fp32 "
               "ratio these cores allow.", ""] + floor_md + [""]
    md += ["## Transport: one LoCo-4 Push through gRPC across the shaped link", "",
           report.transport_table(tr), ""]
    scaling_png = scaling.plot(results, scale_rows, scale_alone)
    md += ["## Scaling (LoCo-4, 8-bit delta return, 10 Gbit/s links, global batch "
           f"{BATCH})", "",
           "A server's step per shard (decode+average and AdamW), in the cluster (the "
           "slowest shard, wall time from its /metrics, sharing the cores with the "
           "workers) and alone (`loco-bench-cpu-step`, one thread, nothing else running, "
           "every shard's step / S).", "", scaling.table(scale_rows, scale_alone), ""]
    if scaling_png:
        md += [f"![scaling]({os.path.basename(scaling_png)})", ""]
    md += ["## Memory against the bounds", ""] + mem + [""]
    if perf_lines:
        md += [f"## Profile at 10 Gbit/s (LoCo-4, large model, perf cpu-clock, {PROFILE_S} s of "
               f"steady training from {PROFILE_SKIP_S} s after its start, the benchmark's "
               f"processes)", "",
               "```"] + perf_lines + ["```", ""]
    if png:
        md += [f"![step time]({os.path.basename(png)})", ""]
    with open(os.path.join(results, "summary.md"), "w") as f:
        f.write("\n".join(md))
    log(f"done in {time.monotonic() - t0:.0f} s: {results}/summary.md")
    return 1 if failures else 0


def user_argv():
    """This run's arguments as the user gave them to run.sh (without the
    --prefix run.sh adds)."""
    argv = sys.argv[1:]
    if "--prefix" in argv:
        k = argv.index("--prefix")
        del argv[k:k + 2]
    return argv


def main():
    ap = argparse.ArgumentParser(description="LoCo-PS end-to-end benchmark on shaped links")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--transport", action="store_true")
    mode.add_argument("--cleanup", action="store_true")
    mode.add_argument("--torch", action="store_true",
                      help="torch DDP against torch through LoCo-PS (bench/e2e/torch_bench.py)")
    mode.add_argument("--torch-quick", action="store_true", help="--torch's smoke test")
    mode.add_argument("--torch-overhead", action="store_true",
                      help="the Python layer against loco-worker at W=1, S=1 "
                           "(bench/e2e/torch_overhead.py)")
    mode.add_argument("--tcp-cost", action="store_true",
                      help="only the CPU cost per MB of the links (bench/e2e/tcp_cost.py)")
    mode.add_argument("--compare", metavar="NAME", default="",
                      help="one configuration, two builds alternated: "
                           + ", ".join(named_configs()))
    ap.add_argument("--prefix", default="", help="namespace prefix 'le<digits>' (run.sh sets it)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--demo-steps", type=int, default=150)
    ap.add_argument("--large-steps", type=int, default=20)
    ap.add_argument("--pair-repeats", type=int, default=2,
                    help="--full: runs of the headline pair (fp32 PS, LoCo-4 4-bit delta, "
                         "batch 64) after the matrix's, in [0, 10]")
    ap.add_argument("--demo-hidden", default="1024,1024",
                    help="hidden sizes of the demo model (a smaller one for a dry run)")
    ap.add_argument("--large-hidden", default="3072,3072",
                    help="hidden sizes of the large model (>= 10M parameters for the targets)")
    ap.add_argument("--transport-elements", default=f"{1 << 20},{4 << 20},{12 << 20}",
                    help="payload sizes of the transport probe, elements, comma separated")
    ap.add_argument("--transport-workers", default="1,4",
                    help="--transport and --full: worker links pushing at once (one probe "
                         "each), comma separated, each in [1, 16]")
    ap.add_argument("--transport-servers", default="1",
                    help="--transport and --full: parameter servers (shards), comma separated, each in "
                         "[1, 8]; with more than one every probe pushes every shard at once")
    ap.add_argument("--transport-pushes", type=int, default=30,
                    help="--transport and --full: timed pushes (rounds) of each probe, in [5, 10000]")
    ap.add_argument("--transport-rates", default="1000,10000",
                    help="--transport: link rates in Mbit/s, comma separated, each in "
                         "[10, 100000]")
    ap.add_argument("--tcp-mib", type=int, default=400,
                    help="--tcp-cost: MiB per stream, in [1, 100000]")
    ap.add_argument("--against-build-dir", default="",
                    help="--compare: the build B that --build-dir (A) is compared against")
    ap.add_argument("--rate", type=int, default=1000, help="--compare: link rate, Mbit/s")
    ap.add_argument("--batch", type=int, default=BATCH, help="--compare: global batch")
    ap.add_argument("--workers", type=int, default=WORKERS, help="--compare: workers")
    ap.add_argument("--compare-steps", type=int, default=40,
                    help="--compare: steps of each run (the first 2 are not timed)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="--compare: runs of each build (alternated A B, B A, ...)")
    ap.add_argument("--openblas-core", default="",
                    help="the OpenBLAS kernels of every process of a measured run, ours and "
                         "the peer's (bench/e2e/blas.py): auto (the fastest of the environment's, "
                         "OpenBLAS's own choice and the AVX2/AVX-512 cores the CPU runs; the "
                         "default of --full and --transport), inherit (the environment's "
                         "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE; always so for --quick) or "
                         "a core name such as SkylakeX; auto and a name must pass a product "
                         "probe first")
    torch_bench.add_arguments(ap)
    torch_overhead.add_arguments(ap)
    a = ap.parse_args()
    if a.openblas_core and a.openblas_core not in ("auto", "inherit") + blas.X86_CORES:
        ap.error(f"--openblas-core must be auto, inherit or one of OpenBLAS's x86 cores "
                 f"({', '.join(blas.X86_CORES)}), got '{a.openblas_core}'")
    if (a.quick or a.torch_quick) and a.openblas_core not in ("", "inherit"):
        ap.error("--quick and --torch-quick are tests and keep the environment's OpenBLAS "
                 "settings: drop --openblas-core, or use --full, --transport or --torch")
    if a.tcp_cost and not 1 <= a.tcp_mib <= 100000:
        ap.error(f"--tcp-mib must be in [1, 100000], got {a.tcp_mib}")
    if a.compare:
        if a.compare not in named_configs():
            ap.error(f"--compare takes a configuration of the measured run, one of "
                     f"{', '.join(named_configs())}; got '{a.compare}'")
        if not a.against_build_dir:
            ap.error("--compare needs --against-build-dir DIR: the build B to compare "
                     "--build-dir (A) against (it may be the same directory)")
        if not 1 <= a.rate <= 100000:
            ap.error(f"--rate must be in [1, 100000] Mbit/s, got {a.rate}")
        if not 1 <= a.workers <= 16 or a.batch < a.workers:
            ap.error(f"--workers must be in [1, 16] and --batch >= --workers, got "
                     f"--workers {a.workers} --batch {a.batch}")
        if not 5 <= a.compare_steps <= 10000 or not 1 <= a.repeat <= 20:
            ap.error(f"--compare-steps must be in [5, 10000] (medians need steps) and --repeat "
                     f"in [1, 20], got {a.compare_steps} and {a.repeat}")
    elif a.against_build_dir:
        ap.error("--against-build-dir is for --compare")
    torch_bench.check_arguments(ap, a)
    torch_overhead.check_arguments(ap, a)
    if a.prefix and not re.fullmatch(r"le\d{1,7}", a.prefix):
        ap.error(f"--prefix must look like le<digits> (at most 7 digits), got '{a.prefix}'")
    if not 0 <= a.pair_repeats <= 10:
        ap.error(f"--pair-repeats must be in [0, 10] (0: only the matrix's pair), "
                 f"got {a.pair_repeats}")
    if a.demo_steps < 30 or a.large_steps < 5:
        ap.error("--demo-steps must be >= 30 and --large-steps >= 5 (medians need steps)")
    try:
        a.demo_hidden = [int(x) for x in a.demo_hidden.split(",")]
        a.large_hidden = [int(x) for x in a.large_hidden.split(",")]
        a.transport_elements = [int(x) for x in a.transport_elements.split(",")]
    except ValueError:
        ap.error("--demo-hidden, --large-hidden and --transport-elements take comma-separated "
                 "positive integers, e.g. 1024,1024")
    if min(a.demo_hidden + a.large_hidden) < 1 or min(a.transport_elements) < 4096:
        ap.error("hidden sizes must be >= 1 and transport payloads >= 4096 elements")
    if not 5 <= a.transport_pushes <= 10000:
        ap.error(f"--transport-pushes must be in [5, 10000], got {a.transport_pushes}")
    for name, lo, hi in (("transport_workers", 1, 16), ("transport_servers", 1, 8),
                         ("transport_rates", 10, 100000)):
        flag = "--" + name.replace("_", "-")
        try:
            values = [int(x) for x in getattr(a, name).split(",")]
        except ValueError:
            ap.error(f"{flag} takes comma-separated integers, got '{getattr(a, name)}'")
        if not all(lo <= v <= hi for v in values):
            ap.error(f"{flag} values must be in [{lo}, {hi}], got '{getattr(a, name)}'")
        setattr(a, name, values)
    if os.geteuid() != 0:
        print("e2e: SKIPPED: needs root to create network namespaces and shape links "
              "(ip netns, tc)", flush=True)
        return 77
    if a.cleanup:
        if a.prefix:
            left = netns.cleanup(a.prefix)
            prefixes = [a.prefix]
        else:
            prefixes, left = cleanup_everything()
        log(f"cleanup: prefixes {prefixes or 'none'}; left {left or 'nothing'}")
        return 1 if left else 0
    for tool in ("ip", "tc", "curl", "/usr/bin/time", "timeout"):
        if not shutil.which(tool):
            print(f"e2e: FAIL: '{tool}' is missing (scripts/install-deps.sh installs iproute2, "
                  f"curl, time, coreutils)", flush=True)
            return 1
    if not a.prefix:
        a.prefix = f"le{os.getpid() % 10**7}"
    a.blas_original = {k: os.environ[k] for k in blas.PINNING if k in os.environ}
    if not a.quick and not a.torch_quick and not a.cleanup and not a.tcp_cost:
        try:
            a.blas_line = blas.choose(a.openblas_core or "auto")
        except RuntimeError as e:
            print(f"e2e: FAIL: {e}", flush=True)
            return 1
        log(a.blas_line)
    h = Harness(a)
    rc = 1
    try:
        if a.quick:
            rc = quick(h)
            return rc
        if a.compare:
            name, codec, bits, pull, block, wargs, sargs = named_configs()[a.compare]
            cfg = ps_cfg(name, codec, bits, pull, a.large_hidden, a.compare_steps, block=block,
                         worker_args=wargs, server_args=sargs, batch=a.batch)
            against = binaries(a.against_build_dir)
            compare.run(h, cfg, against, a.against_build_dir, a.rate, a.repeat, a.results,
                        " ".join(["bench/e2e/run.sh"] + user_argv()), a.blas_line, log)
            rc = 0
            return rc
        if a.torch or a.torch_quick:
            rc = torch_bench.run(h, " ".join(["bench/e2e/run.sh"] + user_argv()),
                                 [a.blas_line] if a.torch else [], log)
            return rc
        if a.torch_overhead:
            rc = torch_overhead.run(h, " ".join(["bench/e2e/run.sh"] + user_argv()),
                                    [a.blas_line], log)
            return rc
        if a.tcp_cost:
            os.makedirs(a.results, exist_ok=True)
            rows = []
            for rate in (0, 1000, 10000):
                rows.append(tcp_cost.measure(h.topology(1, rate or None), h.logs("tcp"),
                                             a.tcp_mib))
                log(f"tcp cost, link {rate or 'unshaped'}: {json.dumps(rows[-1])}")
            report.write_csv(os.path.join(a.results, "tcp_cost.csv"), rows)
            rc = 0
            return rc
        if a.transport:
            os.makedirs(a.results, exist_ok=True)
            transport(h, a.results, a.transport_elements, a.transport_rates,
                      a.transport_workers, a.transport_servers, a.transport_pushes)
            return 0
        return full(h)
    except RuntimeError as e:
        print(f"e2e: FAIL: {e}", flush=True)
        return 1
    finally:
        h.close()
        if (a.quick or a.torch_quick or a.compare or a.tcp_cost or a.torch_overhead) \
                and rc == 0:
            # A passing smoke test leaves nothing; a comparison's (and the
            # torch overhead's) rows are in its CSV, and the processes' logs
            # matter only when a run failed.
            shutil.rmtree(h.work, ignore_errors=True)
        else:
            log(f"logs kept in {h.work}")


if __name__ == "__main__":
    sys.exit(main())
