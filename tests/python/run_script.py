"""A training script as users write one for `python3 -m loco_ps.run`: it
builds DistributedOptimizer(model) without a coordinator and trains a few
steps on its rank's share of fixed data, then prints its rank, world and
the CRC of the parameters it holds; it says when it has joined, with its
process id. With --exit-code N --on-rank R, the worker of rank R exits with
N after joining instead (tests/python/test_run.py)."""

import argparse
import os
import sys
import zlib

import torch
import loco_ps.torch as lps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--exit-code", type=int, default=None)
    parser.add_argument("--on-rank", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(0)
    # 5380 parameters: enough for two shards of 4096-element blocks.
    model = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.Tanh(),
                                torch.nn.Linear(256, 4))
    opt = lps.DistributedOptimizer(model, codec="loco", bits=4, lr=1e-2)
    print(f"rank {opt.rank} joined as process {os.getpid()}", flush=True)
    if args.exit_code is not None and opt.rank == args.on_rank:
        print(f"rank {opt.rank} exits with {args.exit_code}", flush=True)
        sys.exit(args.exit_code)
    data = torch.Generator().manual_seed(1)
    x, y = torch.randn(256, 16, generator=data), torch.randint(0, 4, (256,), generator=data)
    for step in range(args.steps):
        mine = slice(opt.rank + 32 * opt.world_size * step, None, opt.world_size)
        batch_x, batch_y = x[mine][:32], y[mine][:32]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(batch_x), batch_y).backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    print(f"rank {opt.rank} world {opt.world_size} version {opt.worker.version} "
          f"crc {zlib.crc32(flat.numpy().tobytes())} metrics {opt.metrics_address}", flush=True)
    opt.close()


if __name__ == "__main__":
    main()
