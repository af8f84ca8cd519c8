#!/usr/bin/python3
"""The PyTorch DDP peer of the end-to-end benchmark: one rank of a gloo
DistributedDataParallel job training the same MLP as loco-worker (784-H..-10,
ReLU, mean cross-entropy, AdamW with weight decay 0, the same lr and global
batch, Fashion-MNIST normalised as data/fashion_mnist.cc does, weights and
biases uniform in +-1/sqrt(fan_in) as models/mlp.cc and torch.nn.Linear do).

Run by bench/e2e/e2e.py inside a worker's network namespace, with
/usr/bin/python3 (Debian's python3-torch). Prints JSON lines like
loco-worker's (the harness reads the same keys):
  {"event":"step","rank":r,"step":t,"loss":x,"comm_bytes":b}
  {"event":"eval","step":t,"test_accuracy":a}
  {"event":"done","steps":n,"wall_s":s,"threads":k,"blas":"..."}
comm_bytes is the payload this rank hands to the collective per step (the
bucket, or the hook's compressed tensors): what the algorithm sends is about
2 (W-1)/W times that for a ring all-reduce; the veth counters measure it.
"""
import argparse
import datetime
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

MEAN, STD = 0.2860, 0.3530


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read_idx(path, images):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if images:
        n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
        x = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols)
        return torch.from_numpy(((x.astype(np.float32) / 255.0) - MEAN) / STD)
    return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8, offset=8).astype(np.int64))


def make_model(hidden):
    sizes = [784] + hidden + [10]
    layers = []
    for k in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
        if k + 2 < len(sizes):
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for m in model:
            if isinstance(m, nn.Linear):
                bound = 1.0 / (m.in_features ** 0.5)
                m.weight.uniform_(-bound, bound)
                m.bias.uniform_(-bound, bound)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="host:port of rank 0's rendezvous")
    ap.add_argument("--hidden", default="1024,1024")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--hook", choices=["fp32", "fp16", "powersgd"], default="fp32")
    ap.add_argument("--powersgd-rank", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=0)
    ap.add_argument("--eval", choices=["rank0", "none"], default="rank0")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--timeout-s", type=int, default=120)
    a = ap.parse_args()
    if a.world < 1 or not (0 <= a.rank < a.world) or a.steps < 1 or a.global_batch < a.world:
        print(f"ddp_peer.py: invalid rank/world/steps/batch: {a.rank}/{a.world}/{a.steps}/"
              f"{a.global_batch}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    hidden = [int(h) for h in a.hidden.split(",")]
    t0 = time.monotonic()
    xs = read_idx(os.path.join(a.data_dir, "train-images-idx3-ubyte.gz"), True)
    ys = read_idx(os.path.join(a.data_dir, "train-labels-idx1-ubyte.gz"), False)
    xt = read_idx(os.path.join(a.data_dir, "t10k-images-idx3-ubyte.gz"), True)
    yt = read_idx(os.path.join(a.data_dir, "t10k-labels-idx1-ubyte.gz"), False)

    host, port = a.master.rsplit(":", 1)
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=a.rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout_s))
    model = make_model(hidden)  # same seed on every rank; DDP also broadcasts rank 0's
    # One bucket: PowerSGD on gloo needs it in torch 1.13, and it is the
    # fastest layout for the others on a slow link too (one collective per step).
    # DDP sizes its first bucket by dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB),
    # whatever bucket_cap_mb says: on a model over 1 MiB that makes two
    # buckets, whose PowerSGD hook chains then issue gloo collectives from
    # two threads in an order that differs between ranks (gloo aborts:
    # "op.preamble.length <= op.nbytes"). Torch documents this knob.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096 * 2**20
    ddp = DDP(model, bucket_cap_mb=4096)
    n_params = sum(p.numel() for p in model.parameters())
    comm_bytes = 4 * n_params
    if a.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        comm_bytes = 2 * n_params
    elif a.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=a.powersgd_rank,
                                   start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
        r = a.powersgd_rank
        comm_bytes = 0
        for p in model.parameters():  # P and Q per matrix, 1-D tensors uncompressed
            comm_bytes += 4 * (r * (p.shape[0] + p.shape[1]) if p.dim() == 2 else p.numel())
    opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    loss_fn = nn.CrossEntropyLoss()
    local = a.global_batch // a.world
    gen = torch.Generator().manual_seed(a.seed)
    per_epoch = xs.shape[0] // a.global_batch
    perm = None
    for t in range(a.steps):
        if t % per_epoch == 0:
            perm = torch.randperm(xs.shape[0], generator=gen)
        base = (t % per_epoch) * a.global_batch + a.rank * local
        idx = perm[base:base + local]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(xs[idx]), ys[idx])
        loss.backward()
        opt.step()
        emit({"event": "step", "rank": a.rank, "step": t, "loss": float(loss),
              "comm_bytes": comm_bytes})
        last = t + 1 == a.steps
        if a.eval == "rank0" and a.rank == 0 and (
                last or (a.eval_every > 0 and (t + 1) % a.eval_every == 0)):
            with torch.no_grad():
                acc = float((model(xt).argmax(1) == yt).float().mean())
            emit({"event": "eval", "step": t + 1, "test_accuracy": acc})
    dist.barrier()
    emit({"event": "done", "steps": a.steps, "wall_s": time.monotonic() - t0,
          "threads": torch.get_num_threads(), "params": n_params})
    # Exit at once, without destroy_process_group or destructors: rank 0
    # hosts the rendezvous store, and in torch 1.13 a rank still talking to
    # it when rank 0 has gone spins in poll() until it is killed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
