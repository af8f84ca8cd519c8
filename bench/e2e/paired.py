"""The headline ratio in repeated, alternating pairs.

The target LoCo-4 step ≤ 0.2× our fp32 parameter server is judged from one
row of each in the measured run. On a shared host two runs of the same row
can differ by 10-20 %, so --full runs the same two configurations again,
alternating, --pair-repeats more times, and states every pair's ratio and
their median next to the single-run verdict.

A pair is (fp32 PS row, LoCo-4 row) run back to back on the same links; its
ratio is LoCo-4 step / fp32 PS step. Pairs with a missing or failed row are
left out and said so.
"""
import statistics

# The rows compared: our fp32 PS and LoCo-4 with the 4-bit delta return,
# on the large model at 1 Gbit/s with the small global batch.
FP32 = "fp32-ps"
LOCO = "loco4-delta-pull4"
TARGET = 0.2


def first_pair(rows, params_min, link_mbit, batch):
    """The pair the matrix ran: its FP32 and LOCO rows for a model of at
    least params_min parameters on link_mbit links at `batch`; None for a
    row that is missing."""
    found = {}
    for r in rows:
        if (r.get("params", 0) >= params_min and r.get("link_mbit") == link_mbit and
                r.get("batch") == batch):
            name = r["config"].split("@")[0]
            if name in (FP32, LOCO):
                found[name] = r
    return found.get(FP32), found.get(LOCO)


def ratio(pair):
    """LoCo-4 step / fp32 PS step, or None when either row or step is missing."""
    fp32, loco = pair
    if not fp32 or not loco or not fp32.get("step_s") or not loco.get("step_s"):
        return None
    return loco["step_s"] / fp32["step_s"]


def summary_lines(pairs, target=TARGET):
    """Markdown lines: one per pair, then the median and its verdict."""
    lines, got = [], []
    for k, pair in enumerate(pairs):
        r = ratio(pair)
        if r is None:
            lines.append(f"- pair {k + 1}: a row is missing (not run, or failed); left out")
            continue
        got.append(r)
        fp32, loco = pair
        lines.append(f"- pair {k + 1}: LoCo-4 {loco['step_s']:.3g} s / fp32 PS "
                     f"{fp32['step_s']:.3g} s = {r:.3f}")
    if not got:
        lines.append(f"- no complete pair: the ratio ≤ {target}× cannot be judged")
        return lines
    med = statistics.median(got)
    verdict = "met" if med <= target else "MISSED"
    lines.append(f"- median of {len(got)} pair(s): {med:.3f} (range {min(got):.3f}–"
                 f"{max(got):.3f}); LoCo-4 step ≤ {target}× fp32 PS → {verdict}")
    return lines


def run_repeats(run_row, repeats, first=2):
    """`repeats` more pairs, numbered from `first`: run_row(FP32, k) then
    run_row(LOCO, k), each returning its row or None (failed)."""
    return [(run_row(FP32, k), run_row(LOCO, k)) for k in range(first, first + repeats)]
