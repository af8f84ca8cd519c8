"""The compute floor of a LoCo-4 step on the benchmark's machine.

On a machine where the workers and servers share a few cores, a LoCo-4
step cannot be shorter than their computation divided by the cores, however
well communication overlaps it. measure() times, each alone, one worker's
computation (loco-bench-cpu-step: forward and backward, compression,
applying the returned delta) and the servers' step (every shard: the
workers' payloads decoded into AdamW, the return delta encoded);
floor_lines() turns them into that bound per configuration and compares it
with the step the row measured and with our fp32 parameter server's step.
"""
import re
import subprocess

# (row config, the return delta's code width) for the rows the floor is
# stated for: the block size of the pushes is the workers' default in both,
# as in loco-bench-cpu-step.
DELTA_ROWS = (("loco4-delta", 8), ("loco4-delta-pull4", 4))

_NUMBER = r"([0-9.eE+-]+)"
_FIELDS = {
    "step": r"step \(forward\+backward\) median s: " + _NUMBER,
    "compress": r"compress \(LoCo-4, every shard\) median s: " + _NUMBER,
    "server": r"server \(every shard, [0-9]+ payloads\) median s: " + _NUMBER,
    "apply": r"apply \(the returned deltas\) median s: " + _NUMBER,
    "copy": r"copy \(memcpy of the parameters\) median s: " + _NUMBER,
}


def parse(text):
    """loco-bench-cpu-step's output -> {step, compress, server, apply, copy}
    in seconds; ValueError naming the first figure that is missing."""
    out = {}
    for key, pattern in _FIELDS.items():
        m = re.search(pattern, text)
        if not m:
            raise ValueError(f"loco-bench-cpu-step printed no {key} figure:\n{text[-2000:]}")
        out[key] = float(m.group(1))
    return out


def measure(binary, hidden, batch_per_worker, pull_bits, workers, shards=2, reps=10,
            timeout_s=300):
    """One worker's computation, and the servers' for `workers` payloads,
    each alone, under the environment's kernels."""
    cmd = [binary, "--hidden", ",".join(str(h) for h in hidden), "--batch",
           str(batch_per_worker), "--shards", str(shards), "--pull-bits", str(pull_bits),
           "--workers", str(workers), "--reps", str(reps)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout_s)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-2000:]}")
    try:
        return parse(r.stdout)
    except ValueError as e:
        raise RuntimeError(str(e)) from e


def floor_seconds(alone, workers, cores):
    """The step's computation spread perfectly over `cores`: each worker's
    step, compression and apply, and the servers' step of every shard
    (`alone`, measured for these `workers`)."""
    worker_s = alone["step"] + alone["compress"] + alone["apply"]
    return (workers * worker_s + alone["server"]) / cores


def floor_lines(rows, alone, cores):
    """Markdown lines: for each delta row of a model with >= 10M parameters
    at 1 Gbit/s whose (per-worker batch, code width) was measured alone,
    the floor, the measured step over it, and the floor over our fp32 PS's
    step in the same group (the best LoCo-4 / fp32 ratio the machine's
    cores allow). `alone`: {(batch per worker, pull bits): measure() for
    the rows' workers}."""
    groups = {}
    for r in rows:
        groups.setdefault((r["params"], r["link_mbit"], r.get("batch") or 0), {})[
            r["config"]] = r
    out = ["| model params | batch | config | one worker: step + compress + apply s | "
           "servers, every shard s | floor s | measured step s | measured / floor | "
           "floor / fp32 PS step |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (n, link, batch), g in sorted(groups.items()):
        if link != 1000 or n < 10_000_000:
            continue
        fp32 = g.get("fp32-ps")
        for name, bits in DELTA_ROWS:
            row = g.get(name)
            if not row or not row.get("step_s") or not row.get("workers"):
                continue
            a = alone.get((batch // row["workers"], bits))
            if not a:
                continue
            floor = floor_seconds(a, row["workers"], cores)
            over_fp32 = (f"{floor / fp32['step_s']:.3g}" if fp32 and fp32.get("step_s")
                         else "–")
            out.append(
                f"| {n / 1e6:.1f}M | {batch} | {name} | "
                f"{a['step']:.4f} + {a['compress']:.4f} + {a['apply']:.4f} | "
                f"{a['server']:.4f} | {floor:.3f} | {row['step_s']:.3f} | "
                f"{row['step_s'] / floor:.2f} | {over_fp32} |")
    return out if len(out) > 2 else []
