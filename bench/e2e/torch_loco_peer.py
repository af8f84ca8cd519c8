#!/usr/bin/python3
"""One worker of the end-to-end benchmark's torch rows: the model, data,
initialisation, batch and lr of ddp_peer.py (imported from it), trained
through loco_ps.torch.DistributedOptimizer against a LoCo-PS cluster
instead of DDP, so that a torch user's step through LoCo-PS is measured
against the same model under DDP and under the C++ loco-worker.

Run by bench/e2e/torch_bench.py (through runs.run_ps, in a worker's network
namespace) with /usr/bin/python3 and PYTHONPATH=<build>/python. Prints
loco-worker's JSON lines, with the keys the harness reads:
  {"event":"step","worker":id,"rank":r,"world":w,"step":t,"loss":x,
   "push_wire_bytes":..,"push_fp32_bytes":..,"pull_wire_bytes":..,"pull_fp32_bytes":..,
   "step_s":s,"compute_s":c, ...}
  {"event":"eval","step":t,"test_accuracy":a}
  {"event":"done","steps":n,"wall_s":s}
The traffic counters are cumulative (the worker's TrafficStats), as
loco-worker's are. step_s is forward + backward + opt.step(), compute_s
forward + backward (with --overlap, backward also hands finished parameters
to the step running in the background), so step_s - compute_s is what
opt.step() left exposed. The other timing keys break the step down:
forward_s, backward_s, opt_step_s, and worker_step_s / worker_compute_s,
the C++ worker's own figures of the same step (StepResult seconds and
compute_seconds: from the step's start, in opt.step() or at the first
gradient hook with --overlap, to its end).
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_peer  # noqa: E402  (the same model and data as the DDP rows)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--coordinator", required=True, help="host:port of the coordinator")
    ap.add_argument("--name", default="")
    ap.add_argument("--codec", default="loco")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--overlap", choices=["on", "off"], default="on",
                    help="push each parameter's gradient while backward still runs")
    ap.add_argument("--insecure", action="store_true", help="the cluster is plaintext")
    ap.add_argument("--wait-for-workers", type=int, default=1)
    ap.add_argument("--hidden", default="1024,1024")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval", choices=["rank0", "none"], default="rank0")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--timeout-s", type=int, default=120)
    a = ap.parse_args()
    if a.steps < 1 or a.wait_for_workers < 1 or a.global_batch < a.wait_for_workers:
        ap.error(f"invalid steps/workers/batch: {a.steps}/{a.wait_for_workers}/{a.global_batch}")
    return a


def load(data_dir):
    names = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    return [ddp_peer.read_idx(os.path.join(data_dir, n), n.endswith("images-idx3-ubyte.gz"))
            for n in names]


def join(lps, model, a, deadline):
    """The optimizer, joined to the cluster. The 4 workers of a run start
    together on 2 shared cores: a join whose connection attempts all time
    out (after the worker's own retries) is tried again, until `deadline`."""
    import loco_ps
    while True:
        try:
            # AdamW as ddp_peer.py's: betas (0.9, 0.999), eps 1e-8, no weight decay.
            return lps.DistributedOptimizer(
                model, coordinator=a.coordinator, codec=a.codec, bits=a.bits, lr=a.lr,
                betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, insecure=a.insecure,
                name=a.name or None, wait_for_workers=a.wait_for_workers,
                wait_timeout_s=max(1.0, deadline - time.monotonic()),
                overlap=a.overlap == "on", rpc_timeout_ms=a.timeout_s * 1000,
                step_timeout_ms=a.timeout_s * 1000, join_timeout_ms=a.timeout_s * 1000)
        except loco_ps.UnavailableError as error:
            if time.monotonic() + 1 >= deadline:
                raise
            print(f"torch_loco_peer: joining failed ({error}); trying again", file=sys.stderr,
                  flush=True)
            time.sleep(1)


def main():
    a = parse_args()
    import loco_ps.torch as lps  # after argparse: --help works without the package

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    hidden = [int(h) for h in a.hidden.split(",")]
    t0 = time.monotonic()
    xs, ys, xt, yt = load(a.data_dir)
    model = ddp_peer.make_model(hidden)
    opt = join(lps, model, a, time.monotonic() + a.timeout_s)
    rank, world = opt.rank, opt.world_size
    loss_fn = nn.CrossEntropyLoss()
    local = a.global_batch // world
    gen = torch.Generator().manual_seed(a.seed)
    per_epoch = xs.shape[0] // a.global_batch
    perm = None
    clock = time.perf_counter
    for t in range(a.steps):
        if t % per_epoch == 0:
            perm = torch.randperm(xs.shape[0], generator=gen)
        base = (t % per_epoch) * a.global_batch + rank * local
        idx = perm[base:base + local]
        x, y = xs[idx], ys[idx]
        opt.zero_grad()
        started = clock()
        loss = loss_fn(model(x), y)
        forward_end = clock()
        loss.backward()
        backward_end = clock()
        opt.step()
        step_end = clock()
        result = opt.last_step_result or {}
        ddp_peer.emit({"event": "step", "worker": opt.worker.worker_id, "rank": rank,
                       "world": world, "step": t, "loss": float(loss), **opt.traffic,
                       "step_s": step_end - started, "compute_s": backward_end - started,
                       "forward_s": forward_end - started,
                       "backward_s": backward_end - forward_end,
                       "opt_step_s": step_end - backward_end,
                       "worker_step_s": result.get("seconds"),
                       "worker_compute_s": result.get("compute_seconds")})
        last = t + 1 == a.steps
        if a.eval == "rank0" and rank == 0 and (
                last or (a.eval_every > 0 and (t + 1) % a.eval_every == 0)):
            with torch.no_grad():
                acc = float((model(xt).argmax(1) == yt).float().mean())
            ddp_peer.emit({"event": "eval", "step": t + 1, "test_accuracy": acc})
    opt.close()
    ddp_peer.emit({"event": "done", "steps": a.steps, "wall_s": time.monotonic() - t0,
                   "threads": torch.get_num_threads(), "params": opt.num_elements})
    return 0


if __name__ == "__main__":
    sys.exit(main())
