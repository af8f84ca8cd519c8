"""--torch and --torch-quick: one PyTorch model trained under DDP/gloo fp32
and through LoCo-PS LoCo-4 (loco_ps.torch.DistributedOptimizer), W workers
on the shaped links, in one run; and what the Python layer costs: the same
MLP trained by the C++ loco-worker and by the torch peer through the same
cluster (same codec, servers, links, batch).

The rows, each run on the same links one after the other:
  ddp-fp32             ddp_peer.py: DDP, gloo all-reduce of the fp32 gradient
  torch-loco4          torch_loco_peer.py: DistributedOptimizer(codec="loco",
                       bits=4, overlap=True); the servers return an 8-bit delta
  worker-loco4         loco-worker against the same cluster (its default
                       overlap of pushes with backward)
  torch-loco4-serial   torch-loco4 with overlap=False
  worker-loco4-serial  worker-loco4 with --overlap-backward=false
The serial pair says where the Python layer's time goes without the
overlap in the way: opt.step()'s wall time against the C++ step inside it
is the wrapper's own time. --torch-repeat rounds run every row, the order
reversed every other round, so that a drift over the run weighs on all
rows alike; each figure is the median over the rounds of each run's
median step. --torch-quick is the ctest smoke run: a tiny model, 2 workers,
the first three rows, a few steps.

summarize() and markdown() are pure (torch_bench_test.py); run() drives.
"""
import os
import statistics
import subprocess
import time

import blas
import report
import runs
import torch_profile
from netns import SERVER_IP

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "torch_loco_peer.py")
# WorkerOptions::block_size, the default of loco-worker and of the binding.
BLOCK = 256
# (config, program, overlap): program is ddp, torch (the LoCo-PS torch
# peer) or worker (loco-worker).
ROWS = (("ddp-fp32", "ddp", None), ("torch-loco4", "torch", True),
        ("worker-loco4", "worker", True), ("torch-loco4-serial", "torch", False),
        ("worker-loco4-serial", "worker", False))
QUICK_ROWS = ROWS[:3]
HEADLINE = ("torch-loco4", "ddp-fp32")
# (torch row, loco-worker row, overlapped): the Python layer's cost.
PAIRS = (("torch-loco4", "worker-loco4", True),
         ("torch-loco4-serial", "worker-loco4-serial", False))
# loco-worker flags of a row beyond what its overlap sets, for rows that
# differ from another in that one setting (--torch-overhead's
# worker-loco4-tensor: worker-loco4 reporting its gradient final once per
# layer, as torch's autograd does).
ROW_WORKER_FLAGS = {"worker-loco4-tensor": ["--ready-granularity", "tensor"]}
OVERHEAD_TARGET = 0.10
# The torch peer's step breakdown, medians over a run's steady steps.
EVENT_KEYS = ("step_s", "forward_s", "backward_s", "opt_step_s", "worker_step_s")
# What summarize() keeps of every row: medians over the rounds.
FIELDS = ("step_s", "compute_s", "exposed_comm_s", "event_step_s", "event_forward_s",
          "event_backward_s", "event_opt_step_s", "event_worker_step_s",
          "push_bytes_per_step", "pull_bytes_per_step", "veth_up_bytes_per_step",
          "veth_down_bytes_per_step", "cpu_busy_share", "final_accuracy")
QUICK = {"hidden": [64], "workers": 2, "rate": 100, "steps": 10, "warmup": 2, "batch": 32,
         "repeat": 1, "servers": 1}


def add_arguments(ap):
    ap.add_argument("--torch-hidden", default="1024,1024",
                    help="--torch: hidden sizes of the MLP (ddp_peer.py's model)")
    ap.add_argument("--torch-steps", type=int, default=50,
                    help="--torch: timed steps of each run, after --torch-warmup more")
    ap.add_argument("--torch-warmup", type=int, default=5,
                    help="--torch: steps of each run before the timed ones")
    ap.add_argument("--torch-repeat", type=int, default=2,
                    help="--torch: rounds of every row (order reversed every other round)")
    ap.add_argument("--torch-profile", action="store_true",
                    help="--torch: then the serial pair once more each under perf: the workers' "
                         "CPU per step by library (torch_profile.py; perf's own report in "
                         "perf_torch_<row>.txt under --results)")


def check_arguments(ap, a):
    """Parses --torch-hidden into a list; ap.error on values out of range."""
    try:
        a.torch_hidden = [int(x) for x in a.torch_hidden.split(",")]
    except ValueError:
        ap.error(f"--torch-hidden takes comma-separated positive integers, got "
                 f"'{a.torch_hidden}'")
    if min(a.torch_hidden) < 1:
        ap.error("--torch-hidden sizes must be >= 1")
    if not 5 <= a.torch_steps <= 10000 or not 1 <= a.torch_warmup <= 1000 \
            or not 1 <= a.torch_repeat <= 10:
        ap.error(f"--torch-steps must be in [5, 10000] (medians need steps), --torch-warmup in "
                 f"[1, 1000], --torch-repeat in [1, 10]; got {a.torch_steps}, "
                 f"{a.torch_warmup}, {a.torch_repeat}")


def _median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(rounds):
    """rounds: [{config: row or None}, ...]. Returns {config: {field:
    median over the rounds that measured it, "runs": [step_s of each
    round that ran it]}} for every config some round ran."""
    names = []
    for got in rounds:
        names += [n for n in got if n not in names]
    out = {}
    for name in names:
        rows = [got[name] for got in rounds if got.get(name)]
        entry = {f: _median(r.get(f) for r in rows) for f in FIELDS}
        entry["runs"] = [r["step_s"] for r in rows if r.get("step_s")]
        if rows:
            entry["system"] = rows[0].get("system")
        out[name] = entry
    return out


def ratio(summary, num, den, field="step_s"):
    a, b = summary.get(num, {}).get(field), summary.get(den, {}).get(field)
    return a / b if a is not None and b else None


def round_ratios(rounds, num, den):
    """num / den of the step in each round that ran both."""
    out = []
    for got in rounds:
        a, b = got.get(num), got.get(den)
        if a and b and a.get("step_s") and b.get("step_s"):
            out.append(a["step_s"] / b["step_s"])
    return out


def _sub(a, b):
    return a - b if a is not None and b is not None else None


def breakdown(summary, torch_row, worker_row):
    """[(part, loco-worker s, torch s)] of one pair: the step (between step
    events), the computation (forward + backward; the C++ gradient), the
    exposed communication (opt.step(); the rest of the C++ Step) and the
    time outside the step (the batch, the event line); medians, so the
    parts need not add up exactly. None where a row lacks a figure."""
    t, w = summary.get(torch_row, {}), summary.get(worker_row, {})
    return [("step", w.get("step_s"), t.get("step_s")),
            ("computation", w.get("compute_s"), t.get("compute_s")),
            ("exposed communication", w.get("exposed_comm_s"), t.get("exposed_comm_s")),
            ("outside the step", _sub(w.get("step_s"), w.get("event_step_s")),
             _sub(t.get("step_s"), t.get("event_step_s")))]


def wrapper_seconds(summary, torch_row):
    """opt.step()'s wall time less the C++ step inside it: the Python
    wrapper's own time in opt.step() (meaningful without overlap, where the
    C++ step starts and ends inside opt.step())."""
    t = summary.get(torch_row, {})
    return _sub(t.get("event_opt_step_s"), t.get("event_worker_step_s"))


def _s(x):
    return "–" if x is None else f"{x:.4f}"


def _pct(x):
    return "–" if x is None else f"{100 * x:+.1f} %"


def headline_lines(summary, rounds):
    loco, ddp = HEADLINE
    r = ratio(summary, loco, ddp)
    if r is None:
        return [f"- {loco} / {ddp}: a row is missing (failed or not run)"]
    t, d = summary[loco], summary[ddp]
    each = round_ratios(rounds, loco, ddp)
    per = ", ".join(f"{x:.3f}" for x in each)
    lines = [f"- step: {loco} {t['step_s']:.4f} s / {ddp} {d['step_s']:.4f} s = **{r:.3f}**; "
             f"each round's: {per}, median {statistics.median(each):.3f}"]
    for row, s in ((loco, t), (ddp, d)):
        lines.append(f"- {row} bytes per worker and step: "
                     f"{report._mb(s.get('push_bytes_per_step'))} MB handed to the network "
                     f"(counter), {report._mb(s.get('veth_up_bytes_per_step'))} MB up / "
                     f"{report._mb(s.get('veth_down_bytes_per_step'))} MB down on its link "
                     "(veth)")
    return lines


def overhead_lines(summary, rounds, pairs=PAIRS):
    lines = []
    for torch_row, worker_row, overlapped in pairs:
        if torch_row not in summary and worker_row not in summary:
            continue
        lines += [f"### {torch_row} against {worker_row}", "",
                  "| part (median s) | loco-worker | torch + DistributedOptimizer | "
                  "torch − worker | share of the torch step |",
                  "| --- | --- | --- | --- | --- |"]
        parts = breakdown(summary, torch_row, worker_row)
        step = parts[0][2]
        for part, w, t in parts:
            d = _sub(t, w)
            share = d / step if d is not None and step else None
            lines.append(f"| {part} | {_s(w)} | {_s(t)} | {_s(d)} | {_pct(share)} |")
        lines.append("")
        r = ratio(summary, torch_row, worker_row)
        if r is None:
            lines.append("- overhead: a row is missing (failed or not run)")
        else:
            each = round_ratios(rounds, torch_row, worker_row)
            per = ", ".join(_pct(x - 1) for x in each)
            median = statistics.median(each) - 1 if each else None
            verdict = "met" if r - 1 < OVERHEAD_TARGET else "MISSED"
            lines.append(f"- overhead: torch step / loco-worker step − 1 = **{_pct(r - 1)}**; "
                         f"each round's: {per}, median {_pct(median)}; target < "
                         f"{_pct(OVERHEAD_TARGET)}: {verdict}")
        t = summary.get(torch_row, {})
        if t.get("event_forward_s") is not None:
            lines.append(f"- torch step parts: forward {_s(t['event_forward_s'])} s, backward "
                         f"{_s(t['event_backward_s'])} s, opt.step() "
                         f"{_s(t['event_opt_step_s'])} s; the C++ step (from its start to its "
                         f"end) {_s(t['event_worker_step_s'])} s")
        wrapper = wrapper_seconds(summary, torch_row)
        if wrapper is not None and not overlapped:
            lines.append(f"- the Python wrapper's own time in opt.step() (its wall time less "
                         f"the C++ step inside it): {_s(wrapper)} s, "
                         f"{_pct(wrapper / t['step_s'] if t.get('step_s') else None)} of the "
                         "step")
        lines.append("")
    return lines


def markdown(command, setup, notes, summary, rounds, failures, profiles=None):
    """The --torch summary: the command, the setup, every row, the
    headline ratio, the Python layer's cost and, when given, the profiles
    (torch_profile.measure's)."""
    lines = ["# PyTorch through LoCo-PS, against DDP and against loco-worker", "",
             f"Command: `{command}`", "", setup, ""]
    items = [f"- {n}" for n in notes] + [f"- FAILED: {f}" for f in failures]
    lines += items + ([""] if items else [])
    lines += ["## Rows (medians over the rounds)", "",
              "| config | system | step s | rounds' steps s | compute / exposed comm s | "
              "push MB/step (counter) | up / down MB/step (veth) | CPU busy | final acc |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, s in summary.items():
        runs_s = ", ".join(f"{x:.4f}" for x in s["runs"]) or "–"
        phases = f"{_s(s.get('compute_s'))} / {_s(s.get('exposed_comm_s'))}"
        lines.append(f"| {name} | {s.get('system') or '–'} | {_s(s.get('step_s'))} | {runs_s} | "
                     f"{phases} | {report._mb(s.get('push_bytes_per_step'))} | "
                     f"{report._mb(s.get('veth_up_bytes_per_step'))} / "
                     f"{report._mb(s.get('veth_down_bytes_per_step'))} | "
                     f"{report._fmt(s.get('cpu_busy_share'))} | "
                     f"{report._fmt(s.get('final_accuracy'))} |")
    lines += ["", "## Torch: LoCo-4 through LoCo-PS against DDP fp32", ""]
    lines += headline_lines(summary, rounds)
    lines += ["", "## The Python layer against the C++ loco-worker", ""]
    lines += overhead_lines(summary, rounds)
    if profiles is not None:
        lines += ["## Where the CPU of a step goes (serial pair, perf)", ""]
        lines += torch_profile.markdown(profiles)
    return "\n".join(lines) + "\n"


def quick_problems(rows, left):
    """What the smoke run must have measured; [] when all is there."""
    problems = []
    for name, _, _ in QUICK_ROWS:
        r = rows.get(name)
        if not r:
            problems.append(f"{name}: no row (the run failed)")
            continue
        if not r.get("step_s") or r["step_s"] <= 0:
            problems.append(f"{name}: no step time measured")
        if not r.get("push_bytes_per_step"):
            problems.append(f"{name}: no bytes counted")
        if r.get("veth_up_bytes_per_step") is None:
            problems.append(f"{name}: no steady-state veth counter samples")
        if name != "ddp-fp32" and r.get("compute_s") is None:
            problems.append(f"{name}: no step phases")
    torch_loco, worker, ddp = (rows.get(n) for n in ("torch-loco4", "worker-loco4", "ddp-fp32"))
    if torch_loco and ddp and torch_loco.get("push_bytes_per_step") and \
            torch_loco["push_bytes_per_step"] >= 0.2 * ddp["push_bytes_per_step"]:
        problems.append(f"torch-loco4 pushed {torch_loco['push_bytes_per_step']} B/step, DDP "
                        f"fp32 hands {ddp['push_bytes_per_step']}: expected < 0.2x")
    if torch_loco and worker and worker.get("push_bytes_per_step"):
        share = torch_loco["push_bytes_per_step"] / worker["push_bytes_per_step"]
        if not 0.9 <= share <= 1.1:
            problems.append(f"torch-loco4 pushed {share:.2f}x loco-worker's bytes per step with "
                            "the same codec and model: expected the same")
    if left:
        problems.append(f"namespaces left behind: {left}")
    return problems


def _cfg(name, program, overlap, p):
    """The row's configuration for runs.run_ps / runs.run_ddp."""
    cfg = {"name": name, "hidden": p["hidden"], "steps": p["steps"] + p["warmup"],
           "batch": p["batch"], "lr": 1e-3, "warmup": p["warmup"], "target": 0.80,
           "eval_every": p["eval_every"]}
    if program == "ddp":
        return dict(cfg, hook="fp32")
    return dict(cfg, codec="loco", bits=4, pull="delta", block=BLOCK, servers=p["servers"],
                server_args=[], event_medians=EVENT_KEYS,
                worker_args=([] if overlap else ["--overlap-backward=false"])
                + ROW_WORKER_FLAGS.get(name, []),
                system="torch+loco-ps" if program == "torch" else "loco-ps")


def torch_worker(build_dir, overlap, blas_dir, limit_s):
    """runs.run_ps's worker(i, cfg, insecure): the torch LoCo-PS peer."""
    env = {"PYTHONPATH": os.path.join(build_dir, "python")}
    if blas_dir:
        env["LD_LIBRARY_PATH"] = blas_dir

    def argv(i, cfg, insecure):
        return (["/usr/bin/python3", PEER,
                 "--coordinator", f"{SERVER_IP}:{runs.COORD_PORT}", "--name", f"w{i}",
                 "--codec", cfg["codec"], "--bits", cfg["bits"],
                 "--overlap", "on" if overlap else "off",
                 "--wait-for-workers", cfg["workers"],
                 "--hidden", ",".join(map(str, cfg["hidden"])), "--steps", cfg["steps"],
                 "--global-batch", cfg["batch"], "--lr", cfg["lr"],
                 "--eval", "rank0" if cfg["eval_every"] else "none",
                 "--eval-every", cfg["eval_every"] or 0, "--timeout-s", int(limit_s)]
                + (["--insecure"] if insecure else []), env)
    return argv


def python_refusal(build_dir):
    """None when the torch rows can run; otherwise the exit code to return
    (77 skipped, 1 failed), after saying why."""
    skip, fail = missing_python(build_dir)
    if skip:
        print(f"e2e: SKIPPED: {skip}", flush=True)
        return 77
    if fail:
        print(f"e2e: FAIL: {fail}", flush=True)
        return 1
    return None


def missing_python(build_dir):
    """(skip reason, failure reason): torch absent is a skip; the loco_ps
    package not importable from build_dir/python a failure."""
    def imports(module, env=None):
        r = subprocess.run(["/usr/bin/python3", "-c", f"import {module}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=120, env=dict(os.environ, **(env or {})))
        return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]
    ok, _ = imports("torch")
    if not ok:
        return ("PyTorch (python3-torch) is missing (scripts/install-deps.sh --bench "
                "installs it)", None)
    ok, why = imports("loco_ps.torch", {"PYTHONPATH": os.path.join(build_dir, "python")})
    if not ok:
        return None, (f"cannot import loco_ps.torch from {build_dir}/python ({why}): build it "
                      f"(cmake --build {build_dir} --target _core)")
    return None, None


def _run_row(h, topo, name, program, overlap, p, blas_dir, limit_s, on_training=None):
    cfg = _cfg(name, program, overlap, p)
    logs = h.logs("torch")
    if program == "ddp":
        return runs.run_ddp(topo, logs, cfg, limit_s, blas_dir)
    worker = torch_worker(h.args.build_dir, overlap, blas_dir, limit_s) \
        if program == "torch" else None
    return runs.run_ps(topo, h.bins, logs, cfg, limit_s, worker=worker, on_training=on_training)


def _settings(a, quick):
    """(settings, rows, limit_s or None) of a measured run or the smoke run."""
    if quick:
        return dict(QUICK, eval_every=0), QUICK_ROWS, 60
    return ({"hidden": a.torch_hidden, "workers": 4, "rate": 1000, "steps": a.torch_steps,
             "warmup": a.torch_warmup, "batch": 256, "repeat": a.torch_repeat, "servers": 2,
             "eval_every": a.torch_steps + a.torch_warmup}, ROWS, None)


def _rounds(h, topo, rows, p, blas_dir, limit_s, failures, log):
    """Every row p["repeat"] times, the order reversed every other round;
    returns the rounds ([{config: row}]) and every row in run order. A row
    that fails is listed in `failures` and the run goes on."""
    rounds, flat = [], []
    for k in range(p["repeat"]):
        got = {}
        for name, program, overlap in (rows if k % 2 == 0 else tuple(reversed(rows))):
            try:
                row = _run_row(h, topo, name, program, overlap, p, blas_dir, limit_s)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                failures.append(f"round {k + 1} {name}: {str(e).splitlines()[0] if str(e) else e}")
                log(f"FAILED round {k + 1} {name}: {e}")
                continue
            row["round"] = k + 1
            got[name] = row
            flat.append(row)
            log(f"round {k + 1} {name}: step {row['step_s']} s, compute "
                f"{row.get('compute_s')} s, push {row['push_bytes_per_step']} B/step")
        rounds.append(got)
    return rounds, flat


def _profiles(h, topo, p, blas_dir, limit_s, failures, log):
    """torch_profile.measure over the serial pair; {} when it failed."""
    os.makedirs(h.args.results, exist_ok=True)
    kinds = {name: (program, overlap) for name, program, overlap in ROWS}

    def run_profiled(name, on_training):
        return _run_row(h, topo, name, *kinds[name],
                        dict(p, steps=torch_profile.PROFILE_STEPS, eval_every=0), blas_dir,
                        limit_s, on_training)
    try:
        return torch_profile.measure(run_profiled, topo, h.work, h.args.results, log)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        failures.append(f"profile: {str(e).splitlines()[0] if str(e) else e}")
        return {}


def _setup_line(p, seconds):
    return (f"Model: MLP 784-{'-'.join(map(str, p['hidden']))}-10 "
            f"({runs.mlp_params(p['hidden']) / 1e6:.2f}M parameters), W={p['workers']} "
            f"workers, S={p['servers']} servers (LoCo-4 push, 8-bit delta return), global "
            f"batch {p['batch']}, {p['rate']} Mbit/s links, {p['steps'] + p['warmup']} steps "
            f"per run of which the first {p['warmup']} are not timed, {p['repeat']} round(s); "
            f"{os.cpu_count()} cores; {seconds:.0f} s.")


def run(h, command, notes, log, limit_s=600):
    """Runs --torch (measured, results in --results) or --torch-quick
    (checks, results in the run's work folder); returns an exit code (77:
    skipped)."""
    a = h.args
    quick = a.torch_quick
    refused = python_refusal(a.build_dir)
    if refused is not None:
        return refused
    p, rows, quick_limit_s = _settings(a, quick)
    limit_s = quick_limit_s or limit_s
    # OpenBLAS for the torch processes of a measured run, as --full gives
    # the DDP peer (blas.py): Debian's torch otherwise multiplies with the
    # reference BLAS. The smoke run keeps the environment's.
    blas_dir = None
    if not quick and os.path.isdir(blas.OPENBLAS_DIR):
        blas_dir = blas.OPENBLAS_DIR
    t0 = time.monotonic()
    topo = h.topology(p["workers"], p["rate"])
    failures = []
    rounds, flat = _rounds(h, topo, rows, p, blas_dir, limit_s, failures, log)
    profiles = None
    if not quick and a.torch_profile:
        profiles = _profiles(h, topo, p, blas_dir, limit_s, failures, log)
    left = h.close()
    text = markdown(command, _setup_line(p, time.monotonic() - t0), notes, summarize(rounds),
                    rounds, failures, profiles)
    out_dir = h.work if quick else a.results
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "torch.md"), "w") as f:
        f.write(text)
    report.write_csv(os.path.join(out_dir, "torch.csv"), flat)
    print(text, flush=True)
    log(f"torch rows took {time.monotonic() - t0:.0f} s: {out_dir}/torch.md")
    if quick:
        problems = quick_problems(rounds[0], left)
        for problem in problems:
            log(f"FAIL: {problem}")
        return 1 if problems else 0
    return 1 if failures or left else 0
