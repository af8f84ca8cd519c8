"""The worker process of test_torch_optimizer.py's expiry test: trains
torch_task's model for --steps steps, one every --interval seconds, printing
"STEP <version>" after each and, at the end, "REJOINED <count>" (the
warnings DistributedOptimizer gave when it joined again)."""

import argparse
import time
import warnings

import torch

import loco_ps.torch as lps
import torch_task


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--interval", type=float, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = torch_task.make_model()
    opt = lps.DistributedOptimizer(model, coordinator=args.coordinator, codec="loco",
                                   insecure=True, step_timeout_ms=20000)
    rejoined = 0
    for batch in torch_task.batches(args.steps):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch_task.train(model, opt, [batch])
        rejoined += sum("joined again" in str(w.message) for w in caught)
        print(f"STEP {opt.worker.version}", flush=True)
        time.sleep(args.interval)
    opt.close()
    print(f"REJOINED {rejoined}", flush=True)


if __name__ == "__main__":
    main()
