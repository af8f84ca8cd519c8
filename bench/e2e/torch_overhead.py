"""--torch-overhead: what the Python layer costs against the C++
loco-worker where the CPU is not contended. --torch measures it at W = 4
with 2 servers on the machine's cores, where every CPU millisecond that
torch's own machinery takes in one worker delays the others; this mode
runs the same pairs with W = 1 worker (and any other --torch-overhead-workers)
and 1 server, so that the worker process has a core to itself.

The rows, as --torch's (torch_bench.py) and on the same shaped links, and
one more loco-worker row:
  worker-loco4-tensor   worker-loco4 with --ready-granularity tensor: it
                        reports its gradient final once per layer, after
                        the layer's input gradient, as torch's autograd
                        does, instead of in panels of rows before it
The pairs:
  torch-loco4 / worker-loco4                 overlapped, panel readiness
                                             (the defaults)
  torch-loco4 / worker-loco4-tensor          overlapped, tensor readiness:
                                             what is left is the Python
                                             layer's, not when the parts
                                             become final
  torch-loco4-serial / worker-loco4-serial   without overlap: opt.step()
                                             holds the whole C++ step
The per-worker batch is the W = 4 run's (64), so each worker computes
what a worker of that run computes. --torch-overhead-repeat rounds run all
five rows (worker-loco4-tensor next to torch-loco4), the order reversed
every other round; each pair's overhead is the torch row's step over the
loco-worker row's, less 1, of the medians over the rounds and of every
round alone (their median, quartiles and range: the spread). With
--torch-profile the five rows of the first worker count run once more each
under perf (torch_profile.py: the workers' CPU per step by library; perf's
reports in perf_torch_overhead_w<W>_<row>.txt).

spread() and markdown() are pure (torch_overhead_test.py); run() drives.
"""
import os
import statistics
import subprocess
import time

import blas
import report
import runs
import torch_bench
import torch_profile

# worker-loco4 reporting readiness as torch's autograd does (its flag:
# torch_bench.ROW_WORKER_FLAGS); first, so that torch-loco4 runs next to it
# and to worker-loco4 in either order of a round.
TENSOR_READY_ROW = ("worker-loco4-tensor", "worker", True)
ROWS = (TENSOR_READY_ROW,) + tuple(r for r in torch_bench.ROWS if r[1] != "ddp")
# (torch row, loco-worker row, overlapped), as torch_bench.PAIRS, and what
# the summary calls each pair.
PAIRS = (("torch-loco4", "worker-loco4", True),
         ("torch-loco4", TENSOR_READY_ROW[0], True),
         ("torch-loco4-serial", "worker-loco4-serial", False))
PAIR_NAMES = {"worker-loco4": "overlapped, panel readiness",
              TENSOR_READY_ROW[0]: "overlapped, tensor readiness",
              "worker-loco4-serial": "serial"}
# Per worker, as in --torch's W = 4 run (global batch 256).
BATCH_PER_WORKER = 64
SERVERS = 1
RATE_MBIT = 1000


def add_arguments(ap):
    ap.add_argument("--torch-overhead-workers", default="1",
                    help="--torch-overhead: worker counts, comma separated, each its own "
                         "rounds (1 server each)")
    ap.add_argument("--torch-overhead-repeat", type=int, default=8,
                    help="--torch-overhead: rounds of the five rows per worker count")


def check_arguments(ap, a):
    """Parses --torch-overhead-workers into a list; ap.error on values out of
    range."""
    try:
        a.torch_overhead_workers = [int(x) for x in a.torch_overhead_workers.split(",")]
    except ValueError:
        ap.error(f"--torch-overhead-workers takes comma-separated worker counts, got "
                 f"'{a.torch_overhead_workers}'")
    if not all(1 <= w <= 8 for w in a.torch_overhead_workers):
        ap.error("--torch-overhead-workers counts must be in [1, 8]")
    if not 1 <= a.torch_overhead_repeat <= 30:
        ap.error(f"--torch-overhead-repeat must be in [1, 30], got {a.torch_overhead_repeat}")


def spread(summary, rounds, torch_row, worker_row):
    """The pair's overhead (torch step / loco-worker step - 1): "of_medians"
    (of the rows' medians over the rounds), "rounds" (each round's that ran
    both, in order), "median", "q1", "q3" (quartiles of the rounds', None
    under 4 rounds), "low", "high" and "under_target" (how many rounds were
    under torch_bench.OVERHEAD_TARGET). None when no round ran both."""
    each = [r - 1 for r in torch_bench.round_ratios(rounds, torch_row, worker_row)]
    if not each:
        return None
    r = torch_bench.ratio(summary, torch_row, worker_row)
    q1 = q3 = None
    if len(each) >= 4:
        q1, _, q3 = statistics.quantiles(each, n=4, method="inclusive")
    return {"of_medians": None if r is None else r - 1, "rounds": each,
            "median": statistics.median(each), "q1": q1, "q3": q3, "low": min(each),
            "high": max(each),
            "under_target": sum(1 for x in each if x < torch_bench.OVERHEAD_TARGET)}


def verdict(s):
    """The target holds when the median of the rounds is under it."""
    return "met" if s["median"] < torch_bench.OVERHEAD_TARGET else "MISSED"


def _pct(x):
    return "–" if x is None else f"{100 * x:+.1f} %"


def table_lines(results):
    """results: [(workers, summary, rounds)]. One line per worker count and
    pair: the medians, the overhead and its spread, the verdict."""
    lines = ["| W | pair | loco-worker step s | torch step s | overhead of the medians | "
             "rounds' median (quartiles) | rounds' range | rounds under 10 % | target |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for workers, summary, rounds in results:
        for torch_row, worker_row, _ in PAIRS:
            pair = PAIR_NAMES[worker_row]
            s = spread(summary, rounds, torch_row, worker_row)
            w, t = (summary.get(n, {}).get("step_s") for n in (worker_row, torch_row))
            if s is None:
                lines.append(f"| {workers} | {pair} | {torch_bench._s(w)} | {torch_bench._s(t)} "
                             "| a row is missing | – | – | – | – |")
                continue
            quartiles = "" if s["q1"] is None else f" ({_pct(s['q1'])} to {_pct(s['q3'])})"
            lines.append(f"| {workers} | {pair} | {torch_bench._s(w)} | {torch_bench._s(t)} | "
                         f"{_pct(s['of_medians'])} | {_pct(s['median'])}{quartiles} | "
                         f"{_pct(s['low'])} to {_pct(s['high'])} | "
                         f"{s['under_target']} of {len(s['rounds'])} | {verdict(s)} |")
    return lines


def markdown(command, setup, notes, results, failures, profiles=None):
    """The --torch-overhead summary: the command, the setup, the overhead
    of each pair and worker count with its spread, then per worker count
    --torch's rows and breakdown (torch_bench.overhead_lines), and when
    given, the first worker count's profiles (torch_profile.measure's)."""
    lines = ["# The Python layer against the C++ loco-worker, without CPU contention", "",
             f"Command: `{command}`", "", setup, ""]
    items = [f"- {n}" for n in notes] + [f"- FAILED: {f}" for f in failures]
    lines += items + ([""] if items else [])
    lines += ["## Overhead: torch step / loco-worker step − 1", ""]
    lines += table_lines(results)
    lines += ["", "The target holds where the median of the rounds' overheads is under "
              f"{_pct(torch_bench.OVERHEAD_TARGET)}.", ""]
    for workers, summary, rounds in results:
        lines += [f"## W = {workers}, S = {SERVERS}", "",
                  "| config | step s | rounds' steps s | compute / exposed comm s |",
                  "| --- | --- | --- | --- |"]
        for name, s in summary.items():
            runs_s = ", ".join(f"{x:.4f}" for x in s["runs"]) or "–"
            lines.append(f"| {name} | {torch_bench._s(s.get('step_s'))} | {runs_s} | "
                         f"{torch_bench._s(s.get('compute_s'))} / "
                         f"{torch_bench._s(s.get('exposed_comm_s'))} |")
        lines.append("")
        lines += [line.replace("### ", "### W = %d: " % workers, 1)
                  for line in torch_bench.overhead_lines(summary, rounds, PAIRS)]
    if profiles is not None:
        workers = results[0][0] if results else "?"
        for torch_row, worker_row, _ in PAIRS:
            lines += [f"## Where the CPU of a step goes at W = {workers}: {torch_row} against "
                      f"{worker_row} (perf)", ""]
            lines += torch_profile.markdown(profiles, (torch_row, worker_row))
    return "\n".join(lines) + "\n"


def _settings(a, workers):
    return {"hidden": a.torch_hidden, "workers": workers, "rate": RATE_MBIT,
            "steps": a.torch_steps, "warmup": a.torch_warmup,
            "batch": BATCH_PER_WORKER * workers, "repeat": a.torch_overhead_repeat,
            "servers": SERVERS, "eval_every": 0}


def _setup_line(a, seconds):
    return (f"Model: MLP 784-{'-'.join(map(str, a.torch_hidden))}-10 "
            f"({runs.mlp_params(a.torch_hidden) / 1e6:.2f}M parameters), W = "
            f"{', '.join(map(str, a.torch_overhead_workers))} worker(s), S = {SERVERS} server "
            f"(LoCo-4 push, 8-bit delta return), batch {BATCH_PER_WORKER} per worker, "
            f"{RATE_MBIT} Mbit/s tbf-shaped veth links (as --torch), "
            f"{a.torch_steps + a.torch_warmup} steps per run of which the first "
            f"{a.torch_warmup} are not timed, {a.torch_overhead_repeat} rounds per W; "
            f"{os.cpu_count()} cores; {seconds:.0f} s.")


def _profiles(h, a, blas_dir, limit_s, failures, log):
    """torch_profile.measure over the five rows at the first worker count;
    {} when it failed."""
    workers = a.torch_overhead_workers[0]
    p = dict(_settings(a, workers), steps=torch_profile.PROFILE_STEPS)
    topo = h.topology(workers, p["rate"])
    kinds = {name: (program, overlap) for name, program, overlap in ROWS}
    os.makedirs(a.results, exist_ok=True)

    def run_profiled(name, on_training):
        return torch_bench._run_row(h, topo, name, *kinds[name], p, blas_dir, limit_s,
                                    on_training)
    try:
        return torch_profile.measure(run_profiled, topo, h.work, a.results, log,
                                     rows=tuple(kinds),
                                     report_prefix=f"perf_torch_overhead_w{workers}_")
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        failures.append(f"profile: {str(e).splitlines()[0] if str(e) else e}")
        return {}


def run(h, command, notes, log, limit_s=600):
    """Runs --torch-overhead (results in --results: torch_overhead.md,
    torch_overhead.csv); returns an exit code (77: skipped)."""
    a = h.args
    refused = torch_bench.python_refusal(a.build_dir)
    if refused is not None:
        return refused
    blas_dir = blas.OPENBLAS_DIR if os.path.isdir(blas.OPENBLAS_DIR) else None
    t0 = time.monotonic()
    failures, results, flat = [], [], []
    for workers in a.torch_overhead_workers:
        p = _settings(a, workers)
        topo = h.topology(workers, p["rate"])
        rounds, rows = torch_bench._rounds(h, topo, ROWS, p, blas_dir, limit_s, failures,
                                           lambda m, w=workers: log(f"W={w} {m}"))
        for row in rows:
            row["workers"] = workers
        flat += rows
        results.append((workers, torch_bench.summarize(rounds), rounds))
    profiles = None
    if a.torch_profile:
        profiles = _profiles(h, a, blas_dir, limit_s, failures, log)
    left = h.close()
    if left:
        failures.append(f"namespaces left behind: {left}")
    text = markdown(command, _setup_line(a, time.monotonic() - t0), notes, results, failures,
                    profiles)
    os.makedirs(a.results, exist_ok=True)
    with open(os.path.join(a.results, "torch_overhead.md"), "w") as f:
        f.write(text)
    report.write_csv(os.path.join(a.results, "torch_overhead.csv"), flat)
    print(text, flush=True)
    log(f"torch overhead took {time.monotonic() - t0:.0f} s: {a.results}/torch_overhead.md")
    return 1 if failures else 0

