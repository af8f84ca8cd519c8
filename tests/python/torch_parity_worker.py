"""One worker process of test_torch_optimizer.py's multi-worker parity test:
trains torch_task's model on its part of every batch through the cluster
and saves the final parameters (model.state_dict()) to --out."""

import argparse

import torch

import loco_ps.torch as lps
import torch_task


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--part", type=int, required=True)
    parser.add_argument("--parts", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--weight-decay", type=float, required=True)
    parser.add_argument("--groups", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = torch_task.make_model()
    params = torch_task.param_groups(model, args.lr) if args.groups else model
    opt = lps.DistributedOptimizer(params, coordinator=args.coordinator, codec="fp32",
                                   lr=args.lr, weight_decay=args.weight_decay, insecure=True,
                                   name=f"parity-{args.part}", wait_for_workers=args.parts,
                                   wait_timeout_s=60)
    torch_task.train(model, opt, torch_task.batches(args.steps), part=args.part,
                     parts=args.parts, with_scheduler=args.groups)
    opt.close()
    torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
