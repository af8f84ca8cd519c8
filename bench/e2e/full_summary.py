"""summary.md of the end-to-end benchmark's measured run (e2e.py --full,
full_run.py): a section per phase from what it measured (the matrix's
steps table and ratios, the headline pair's repeats, the compute floor,
the transport probe, the scaling sweep, memory against its bounds, the
profile) and the plots report.py and scaling.py draw. Reads rows, writes
summary.md and the plots; runs nothing.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floor  # noqa: E402
import memory  # noqa: E402
import paired  # noqa: E402
import report  # noqa: E402
import scaling  # noqa: E402
from configs import BATCH, PROFILE_S, PROFILE_SKIP_S, SMALL_BATCH, WORKERS  # noqa: E402


def pairs_section(pairs, pair_lines, pair_repeats):
    """summary.md's section on the headline pair's repeats."""
    return [f"## The headline ratio in {len(pairs)} alternating pairs", "",
            f"{paired.LOCO} against {paired.FP32}, large model, 1 Gbit/s, global batch "
            f"{SMALL_BATCH}: the matrix's pair, then {pair_repeats} more, each fp32 PS "
            "then LoCo-4 on fresh links (paired.py).", ""] + pair_lines + [""]


def floor_section(rows, alone):
    """summary.md's section on the compute floor; none without a floor."""
    floor_md = floor.floor_lines(rows, alone, os.cpu_count() or 1)
    if not floor_md:
        return []
    return ["## The compute floor (large model, 1 Gbit/s, delta return)", "",
            f"What the step's computation alone takes on this machine's "
            f"{os.cpu_count()} cores: {WORKERS} workers' forward and backward, "
            "compression and delta apply, plus the servers' step of every shard "
            f"(the {WORKERS} payloads decoded into AdamW, the return delta encoded), "
            "each timed alone (`loco-bench-cpu-step`, `worker_alone.csv`), divided by "
            "the cores. No step of that row can be shorter, however well "
            "communication overlaps it; floor / fp32 PS is the best LoCo-4 / fp32 "
            "ratio these cores allow.", ""] + floor_md + [""]


def scaling_section(results, scale_rows, scale_alone):
    """summary.md's section on the scaling sweep, with its plot when drawn."""
    scaling_png = scaling.plot(results, scale_rows, scale_alone)
    md = ["## Scaling (LoCo-4, 8-bit delta return, 10 Gbit/s links, global batch "
          f"{BATCH})", "",
          "A server's step per shard (decode+average and AdamW), in the cluster (the "
          "slowest shard, wall time from its /metrics, sharing the cores with the "
          "workers) and alone (`loco-bench-cpu-step`, one thread, nothing else running, "
          "every shard's step / S).", "", scaling.table(scale_rows, scale_alone), ""]
    if scaling_png:
        md += [f"![scaling]({os.path.basename(scaling_png)})", ""]
    return md


def profile_section(perf_lines):
    """summary.md's section on the profile; none without one."""
    if not perf_lines:
        return []
    return [f"## Profile at 10 Gbit/s (LoCo-4, large model, perf cpu-clock, {PROFILE_S} s of "
            f"steady training from {PROFILE_SKIP_S} s after its start, the benchmark's "
            f"processes)", "",
            "```"] + perf_lines + ["```", ""]


def write_summary(h, t0, notes, failures, m):
    """summary.md (and the step-time plot) from what the phases measured (m)."""
    results = h.args.results
    png = report.plot(results, m.rows)
    ratio_md, verdicts = report.ratios(m.rows, os.cpu_count() or 1)
    mem = memory.bound_lines(m.rows, BATCH)
    md = ["# End-to-end results", "",
          f"Run: `bench/e2e/run.sh --full` on {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{time.monotonic() - t0:.0f} s.", ""]
    md += [f"- {n}" for n in notes] + [f"- FAILED: {f}" for f in failures] + [""]
    md += ["## Step time, bytes, accuracy, memory", "", report.steps_table(m.rows), "",
           "## Ratios (one run)", "", ratio_md, "", "Targets:", ""] + verdicts + [""]
    md += pairs_section(m.pairs, m.pair_lines, h.args.pair_repeats)
    md += floor_section(m.rows, m.alone)
    md += ["## Transport: one LoCo-4 Push through gRPC across the shaped link", "",
           report.transport_table(m.transport), ""]
    md += scaling_section(results, m.scale_rows, m.scale_alone)
    md += ["## Memory against the bounds", ""] + mem + [""]
    md += profile_section(m.perf_lines)
    if png:
        md += [f"![step time]({os.path.basename(png)})", ""]
    with open(os.path.join(results, "summary.md"), "w") as f:
        f.write("\n".join(md))
