#!/usr/bin/python3
"""A small CNN on Fashion-MNIST, trained by W worker processes through a local
LoCo-PS cluster with loco_ps.torch.DistributedOptimizer.

    PYTHONPATH=build/python LOCO_BIN_DIR=build/bin \\
        /usr/bin/python3 examples/torch_fashion_mnist.py --workers 2 --epochs 2

The parent process starts a coordinator and the parameter servers
(loco_ps.Cluster) and W worker processes. Each worker trains the same model
(conv-conv-fc) on its 1/W of every epoch's shuffled training set, with
--batch-size images per worker per step, so one synchronous step sees
W x batch-size images. The servers run AdamW on the mean gradient. After
every epoch, worker 0 prints the test accuracy of the parameters it holds.

The data is Debian's dataset-fashion-mnist (the four *-ubyte.gz files in
/usr/share/datasets/fashion-mnist), read with gzip and numpy.
"""

import argparse
import gzip
import multiprocessing
import os
import sys
import time

import numpy as np

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
CODECS = ("fp32", "bf16", "naive", "ef", "loco")
MEAN, STD = 0.2860, 0.3530  # of the training images, scaled to [0, 1]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--servers", type=int, default=2, help="parameter servers (default 2)")
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training set")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop after this many synchronous steps in all, even within an "
                             "epoch (default: no limit; for quick checks)")
    parser.add_argument("--codec", default="loco", help=f"gradient codec: {', '.join(CODECS)}")
    parser.add_argument("--bits", type=int, default=4, help="bits per code: 2, 4 or 8")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="images per worker per step (default 64)")
    parser.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate")
    parser.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                        help=f"folder of the four *-ubyte.gz files (default {DEFAULT_DATA_DIR})")
    parser.add_argument("--overlap", action="store_true",
                        help="push gradients while backward runs")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="the model's dtype on the workers; with bfloat16 the servers "
                             "keep the fp32 master (mixed precision)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: need at least 1 worker")
    if args.servers < 1:
        parser.error(f"--servers {args.servers}: need at least 1 server")
    if args.epochs < 1:
        parser.error(f"--epochs {args.epochs}: need at least 1 epoch")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error(f"--max-steps {args.max_steps}: need at least 1 step")
    if args.codec not in CODECS:
        parser.error(f"--codec {args.codec!r}: choose one of {', '.join(CODECS)}")
    if args.bits not in (2, 4, 8):
        parser.error(f"--bits {args.bits}: the block codecs take 2, 4 or 8 bits")
    if not 1 <= args.batch_size <= 60000 // args.workers:
        parser.error(f"--batch-size {args.batch_size}: must be in [1, {60000 // args.workers}] "
                     f"(60000 training images shared by {args.workers} workers)")
    if not args.lr > 0:
        parser.error(f"--lr {args.lr}: must be > 0")
    if not args.weight_decay >= 0:
        parser.error(f"--weight-decay {args.weight_decay}: must be >= 0")
    missing = [f for f in FILES.values() if not os.path.isfile(os.path.join(args.data_dir, f))]
    if missing:
        parser.error(f"--data-dir {args.data_dir}: missing {', '.join(missing)} (install "
                     "Debian's dataset-fashion-mnist, or point --data-dir at the files)")
    return args


def read_idx(path, header_bytes):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=header_bytes)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, FILES[f"{split}_images"]), 16)
    labels = read_idx(os.path.join(data_dir, FILES[f"{split}_labels"]), 8)
    images = (images.reshape(-1, 1, 28, 28).astype(np.float32) / 255.0 - MEAN) / STD
    return images, labels.astype(np.int64)


def make_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 32 x 14 x 14
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 64 x 7 x 7
        nn.Flatten(), nn.Linear(64 * 7 * 7, 10))


def accuracy(torch, model, images, labels, dtype):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(images), 1000):
            logits = model(torch.from_numpy(images[i:i + 1000]).to(dtype))
            correct += int((logits.argmax(1) == torch.from_numpy(labels[i:i + 1000])).sum())
    model.train()
    return correct / len(images)


def train_worker(index, coordinator, args, results):
    """One worker process: trains its share of every epoch; worker 0 also
    evaluates. Puts ("epoch", ...) and ("done", ...) records on `results`."""
    import torch
    import torch.nn.functional as F
    import loco_ps.torch as lps

    torch.set_num_threads(1)  # W workers and the servers share the machine's cores
    torch.manual_seed(args.seed)  # the same initial model everywhere (worker 0's wins)
    train_x, train_y = load(args.data_dir, "train")
    test_x, test_y = load(args.data_dir, "test") if index == 0 else (None, None)
    dtype = getattr(torch, args.dtype)
    # With bfloat16 the model's parameters are staged: each step copies their
    # gradients into the optimizer's float32 buffer and writes the servers'
    # fp32 master back, rounded (python/README.md, "Mixed precision").
    model = make_model(torch).to(dtype)
    opt = lps.DistributedOptimizer(model, coordinator=coordinator, codec=args.codec,
                                   bits=args.bits, lr=args.lr, weight_decay=args.weight_decay,
                                   insecure=True, name=f"fashion-mnist-{index}",
                                   wait_for_workers=args.workers, overlap=args.overlap)
    # Every worker takes the same number of steps per epoch, and the same
    # in all (--max-steps may end the last epoch early), so that no step
    # waits for a worker that has stopped.
    steps_per_epoch = len(train_x) // (args.workers * args.batch_size)
    steps_left = args.epochs * steps_per_epoch if args.max_steps is None \
        else min(args.max_steps, args.epochs * steps_per_epoch)
    started = time.monotonic()
    try:
        for epoch in range(args.epochs):
            if steps_left == 0:
                break
            steps = min(steps_per_epoch, steps_left)
            steps_left -= steps
            order = np.random.default_rng(args.seed + epoch).permutation(len(train_x))
            mine = order[index::args.workers]
            loss_sum = 0.0
            for step in range(steps):
                batch = mine[step * args.batch_size:(step + 1) * args.batch_size]
                x, y = torch.from_numpy(train_x[batch]), torch.from_numpy(train_y[batch])
                opt.zero_grad()
                loss = F.cross_entropy(model(x.to(dtype)).float(), y)
                loss.backward()
                opt.step()
                loss_sum += float(loss)
            record = {"epoch": epoch + 1, "steps": steps, "steps_per_epoch": steps_per_epoch,
                      "loss": loss_sum / steps, "seconds": time.monotonic() - started}
            if index == 0:
                record["test_accuracy"] = accuracy(torch, model, test_x, test_y, dtype)
                results.put(("epoch", record))
        results.put(("done", {"worker": index, "traffic": dict(opt.traffic),
                              "seconds": time.monotonic() - started}))
    finally:
        opt.close()


def main(argv):
    args = parse_args(argv)
    import loco_ps

    started = time.monotonic()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    with loco_ps.Cluster(num_servers=args.servers, lr=args.lr,
                         weight_decay=args.weight_decay) as cluster:
        print(f"cluster: coordinator {cluster.coordinator}, {args.servers} server(s); "
              f"{args.workers} worker(s), codec {args.codec}"
              + (f" ({args.bits} bits)" if args.codec in ("naive", "ef", "loco") else "")
              + f", batch {args.workers} x {args.batch_size}", flush=True)
        workers = [context.Process(target=train_worker, name=f"worker-{i}",
                                   args=(i, cluster.coordinator, args, results))
                   for i in range(args.workers)]
        for w in workers:
            w.start()
        done, final, steps_done = [], None, 0
        while len(done) < args.workers:
            if not any(w.is_alive() for w in workers) and results.empty():
                break
            try:
                kind, record = results.get(timeout=1.0)
            except Exception:  # queue.Empty: look at the processes again
                continue
            if kind == "epoch":
                final = record
                steps_done += record["steps"]
                partial = "" if record["steps"] == record["steps_per_epoch"] else \
                    f" ({record['steps']} of {record['steps_per_epoch']} steps)"
                print(f"epoch {record['epoch']}{partial}: train loss {record['loss']:.4f}, "
                      f"test accuracy {100 * record['test_accuracy']:.2f}% "
                      f"({record['seconds']:.1f} s)", flush=True)
            else:
                done.append(record)
        for w in workers:
            w.join(timeout=30)
        failed = [w.name for w in workers if w.exitcode != 0]
    if failed:
        print(f"error: {', '.join(failed)} failed (see above)", file=sys.stderr)
        return 1
    wire = sum(r["traffic"].get("push_wire_bytes", 0) for r in done)
    fp32 = sum(r["traffic"].get("push_fp32_bytes", 0) for r in done)
    if final is None:
        print("error: worker 0 reported no epoch (see above)", file=sys.stderr)
        return 1
    print(f"final test accuracy {100 * final['test_accuracy']:.2f}% after {steps_done} "
          f"steps ({final['epoch']} epoch(s)); pushed {wire / 2**20:.1f} MiB of gradients (as fp32: "
          f"{fp32 / 2**20:.1f} MiB); wall time {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
