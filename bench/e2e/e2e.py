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
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas  # noqa: E402
import compare  # noqa: E402
import e2e_args  # noqa: E402
import netns  # noqa: E402
import report  # noqa: E402
import runs  # noqa: E402
import tcp_cost  # noqa: E402
import torch_bench  # noqa: E402
import torch_overhead  # noqa: E402
from configs import PS_CONFIGS, named_configs, ps_cfg  # noqa: E402
from full_run import full, transport  # noqa: E402
from harness import Harness, binaries, cleanup_everything, log  # noqa: E402

# The modules of this driver: configs.py (the measured run's rows),
# harness.py (Harness, log, attempt, binaries), e2e_args.py (the flags and
# their checks), full_run.py (--full in phases, and the transport probe)
# and full_summary.py (its summary.md).


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


def user_argv():
    """This run's arguments as the user gave them to run.sh (without the
    --prefix run.sh adds)."""
    argv = sys.argv[1:]
    if "--prefix" in argv:
        k = argv.index("--prefix")
        del argv[k:k + 2]
    return argv


def command_line():
    """This run's command as the user typed it, for the summaries."""
    return " ".join(["bench/e2e/run.sh"] + user_argv())


def cleanup(a):
    """--cleanup: that run's namespaces with --prefix, else every one named
    like ours; returns an exit code (1 when some are left)."""
    if a.prefix:
        left = netns.cleanup(a.prefix)
        prefixes = [a.prefix]
    else:
        prefixes, left = cleanup_everything()
    log(f"cleanup: prefixes {prefixes or 'none'}; left {left or 'nothing'}")
    return 1 if left else 0


def prepare(a):
    """The tools every mode needs, the run's namespace prefix, and the
    OpenBLAS kernels of a measured run (a.blas_line); an exit code when the
    run cannot go on, else None."""
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
    return None


def tcp_cost_run(h):
    """--tcp-cost: one stream unshaped and at 1 and 10 Gbit/s; tcp_cost.csv."""
    a = h.args
    os.makedirs(a.results, exist_ok=True)
    rows = []
    for rate in (0, 1000, 10000):
        rows.append(tcp_cost.measure(h.topology(1, rate or None), h.logs("tcp"), a.tcp_mib))
        log(f"tcp cost, link {rate or 'unshaped'}: {json.dumps(rows[-1])}")
    report.write_csv(os.path.join(a.results, "tcp_cost.csv"), rows)
    return 0


def run_mode(h):
    """The mode the flags named, on the Harness h; returns its exit code."""
    a = h.args
    if a.quick:
        return quick(h)
    if a.compare:
        name, codec, bits, pull, block, wargs, sargs = named_configs()[a.compare]
        cfg = ps_cfg(name, codec, bits, pull, a.large_hidden, a.compare_steps, block=block,
                     worker_args=wargs, server_args=sargs, batch=a.batch)
        against = binaries(a.against_build_dir)
        compare.run(h, cfg, against, a.against_build_dir, a.rate, a.repeat, a.results,
                    command_line(), a.blas_line, log)
        return 0
    if a.torch or a.torch_quick:
        return torch_bench.run(h, command_line(), [a.blas_line] if a.torch else [], log)
    if a.torch_overhead:
        return torch_overhead.run(h, command_line(), [a.blas_line], log)
    if a.tcp_cost:
        return tcp_cost_run(h)
    if a.transport:
        os.makedirs(a.results, exist_ok=True)
        transport(h, a.results, a.transport_elements, a.transport_rates,
                  a.transport_workers, a.transport_servers, a.transport_pushes)
        return 0
    return full(h)


def main():
    a = e2e_args.parse()
    if os.geteuid() != 0:
        print("e2e: SKIPPED: needs root to create network namespaces and shape links "
              "(ip netns, tc)", flush=True)
        return 77
    if a.cleanup:
        return cleanup(a)
    rc = prepare(a)
    if rc is not None:
        return rc
    h = Harness(a)
    rc = 1
    try:
        rc = run_mode(h)
        return rc
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
