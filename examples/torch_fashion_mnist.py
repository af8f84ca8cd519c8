#!/usr/bin/python3
"""A small CNN on Fashion-MNIST, trained by W workers through LoCo-PS with
loco_ps.torch.DistributedOptimizer: on a local cluster, or as one worker of
a running one.

    PYTHONPATH=build/python LOCO_BIN_DIR=build/bin \\
        /usr/bin/python3 examples/torch_fashion_mnist.py --workers 2 --epochs 2

Local (the default): the parent process starts a coordinator and the
parameter servers (loco_ps.Cluster) and W worker processes.

Joined (--coordinator HOST:PORT, or $LOCO_COORDINATOR set): this process
is one worker of the cluster whose coordinator that is (a Kubernetes pod of
deploy/k8s/overlays/torch, a trainer on another machine, or a worker of
`python3 -m loco_ps.run`); start one per worker. --workers is then how many
workers step 0 waits for, and the TLS, token and metrics flags, or the
environment's LOCO_* settings, reach the cluster as a production trainer
would.

Each worker trains the same model (conv-conv-fc) on its share of every
epoch's shuffled training set. A synchronous step takes the next
W x --batch-size images of the epoch's order (its global batch), and the
workers of that step share them by the cluster's rank and world: rank r of
a world of w takes every w-th from r. So W x batch-size is what a step
sees however many workers it has, and when workers join or leave each
image of the epoch is still seen once (step_batch), except in a step whose
workers' views of the world differ (a worker's rank and world are as it
last heard). The servers run AdamW on the mean of the workers' gradients
(each the mean over its share). After every epoch, the worker of rank 0
prints the test accuracy of the parameters it holds.

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
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (default 2); joined, the workers step 0 waits "
                             "for (default $LOCO_WAIT_FOR_WORKERS, else 1)")
    parser.add_argument("--servers", type=int, default=None,
                        help="parameter servers of the local cluster (default 2)")
    parser.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                        help="join the cluster of this coordinator as one worker, instead of "
                             "starting a local cluster (default: $LOCO_COORDINATOR when set, "
                             "with the other LOCO_* settings of the environment)")
    parser.add_argument("--insecure", action="store_true",
                        help="with --coordinator: plaintext gRPC (a trusted network)")
    parser.add_argument("--tls-ca", default=None,
                        help="with --coordinator: the CA that signed the cluster's certificates")
    parser.add_argument("--auth-token-file", default=None,
                        help="with --coordinator: the worker token")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="with --coordinator: serve this worker's Prometheus /metrics "
                             "there (0: any free port)")
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="with --metrics-port: the address to listen on (default "
                             "127.0.0.1; 0.0.0.0 in a pod)")
    parser.add_argument("--name", default=os.environ.get("LOCO_NAME"),
                        help="with --coordinator: this worker's name in the coordinator's "
                             "logs (default $LOCO_NAME)")
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training set")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop after this many synchronous steps in all, even within an "
                             "epoch (default: no limit; for quick checks)")
    parser.add_argument("--codec", default="loco", help=f"gradient codec: {', '.join(CODECS)}")
    parser.add_argument("--bits", type=int, default=4, help="bits per code: 2, 4 or 8")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="images per worker per step when --workers take part; a step's "
                             "--workers x --batch-size images are shared by the workers it "
                             "has (default 64)")
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
    check_cluster_flags(parser, args)
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: need at least 1 worker")
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


def check_cluster_flags(parser, args):
    """The flags of the two modes: a local cluster's size, or how to reach
    a running one (--coordinator, or the environment's LOCO_COORDINATOR as
    `python3 -m loco_ps.run` and the Kubernetes pods set it). Sets
    args.joined and args.workers."""
    joined_only = {"--insecure": args.insecure, "--tls-ca": args.tls_ca,
                   "--auth-token-file": args.auth_token_file,
                   "--metrics-port": args.metrics_port}
    from_environment = args.coordinator is None and os.environ.get("LOCO_COORDINATOR", "") != ""
    args.joined = args.coordinator is not None or from_environment
    if args.workers is None:
        waits = os.environ.get("LOCO_WAIT_FOR_WORKERS", "") if from_environment else ""
        args.workers = (int(waits) if waits.isdigit() and int(waits) > 0 else 1) \
            if args.joined else 2
    if not args.joined:
        given = [flag for flag, value in joined_only.items()
                 if value is not None and value is not False]  # 0 is a port given
        if given:
            parser.error(f"{', '.join(given)}: for joining a running cluster (--coordinator); "
                         "the local cluster is plaintext on loopback")
        args.servers = 2 if args.servers is None else args.servers
        if args.servers < 1:
            parser.error(f"--servers {args.servers}: need at least 1 server")
        return
    if args.servers is not None:
        parser.error("--servers: the cluster of --coordinator has its own servers; "
                     "--servers sizes a local cluster")
    if args.coordinator is not None and args.insecure == (args.tls_ca is not None):
        parser.error("--coordinator: give --tls-ca (the cluster's CA) or --insecure "
                     "(plaintext, a trusted network), one of them")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        parser.error(f"--metrics-port {args.metrics_port}: expected a port in [0, 65535] "
                     "(0: any free port)")


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


def step_batch(order, step, global_batch, rank, world):
    """The positions in `order` (an epoch's shuffled image indices) that
    the worker of `rank` in a world of `world` trains on in the epoch's
    step `step`: every world-th from rank among the step's `global_batch`.
    The ranks 0..world-1 of one step take each of its images exactly once,
    whatever the world; a rank past the global batch (more workers than
    its images) repeats one of them rather than push nothing."""
    first = step * global_batch
    batch = order[first + rank:first + global_batch:world]
    if len(batch) == 0:
        batch = order[first + rank % global_batch:first + rank % global_batch + 1]
    return batch


def train(args, connection, report):
    """One worker: joins through `connection` (DistributedOptimizer's
    keywords for reaching the cluster) and trains its share of every epoch;
    the worker of rank 0 also evaluates. Calls report("epoch", record) after
    each epoch (rank 0) and report("done", record) at the end."""
    import torch
    import torch.nn.functional as F
    import loco_ps.torch as lps

    torch.set_num_threads(1)  # W workers and the servers share the machine's cores
    torch.manual_seed(args.seed)  # the same initial model everywhere (the first offer wins)
    train_x, train_y = load(args.data_dir, "train")
    test = None  # (images, labels), loaded once this worker first evaluates as rank 0
    dtype = getattr(torch, args.dtype)
    # With bfloat16 the model's parameters are staged: each step copies their
    # gradients into the optimizer's float32 buffer and writes the servers'
    # fp32 master back, rounded (python/README.md, "Mixed precision").
    model = make_model(torch).to(dtype)
    opt = lps.DistributedOptimizer(model, codec=args.codec, bits=args.bits, lr=args.lr,
                                   weight_decay=args.weight_decay,
                                   wait_for_workers=args.workers, overlap=args.overlap,
                                   **connection)
    if opt.metrics_address is not None:
        print(f"metrics: http://{opt.metrics_address}/metrics", flush=True)
    # The run is --epochs epochs of steps_per_epoch steps (fewer with
    # --max-steps), counted by the cluster's step: a worker that joins late
    # (or a pod restarted after the run) trains only the steps left, so that
    # no step waits for a worker that has stopped. The share of a step is
    # by the rank and world of that step (step_batch).
    global_batch = args.workers * args.batch_size
    steps_per_epoch = len(train_x) // global_batch
    total = args.epochs * steps_per_epoch if args.max_steps is None \
        else min(args.max_steps, args.epochs * steps_per_epoch)
    first = opt.worker.version
    started = time.monotonic()
    try:
        if first >= total:
            print(f"the cluster is at step {first} of {total}: nothing left to train", flush=True)
        loss_sum, steps = 0.0, 0
        for global_step in range(first, total):
            epoch, step = divmod(global_step, steps_per_epoch)
            if steps == 0:
                order = np.random.default_rng(args.seed + epoch).permutation(len(train_x))
            batch = step_batch(order, step, global_batch, opt.rank, opt.world_size)
            x, y = torch.from_numpy(train_x[batch]), torch.from_numpy(train_y[batch])
            opt.zero_grad()
            loss = F.cross_entropy(model(x.to(dtype)).float(), y)
            loss.backward()
            opt.step()
            loss_sum, steps = loss_sum + float(loss), steps + 1
            if step == steps_per_epoch - 1 or global_step == total - 1:
                record = {"epoch": epoch + 1, "steps": steps, "steps_per_epoch": steps_per_epoch,
                          "loss": loss_sum / steps, "seconds": time.monotonic() - started}
                if opt.rank == 0:
                    test = test or load(args.data_dir, "test")
                    record["test_accuracy"] = accuracy(torch, model, *test, dtype)
                    report("epoch", record)
                loss_sum, steps = 0.0, 0
        report("done", {"traffic": dict(opt.traffic), "seconds": time.monotonic() - started})
    finally:
        opt.close()


def train_worker(index, coordinator, args, results):
    """A worker process of the local cluster: train() with its records on
    `results`."""
    connection = dict(coordinator=coordinator, insecure=True, name=f"fashion-mnist-{index}")
    train(args, connection, lambda kind, record: results.put((kind, record)))


def print_epoch(record):
    partial = "" if record["steps"] == record["steps_per_epoch"] else \
        f" ({record['steps']} of {record['steps_per_epoch']} steps)"
    print(f"epoch {record['epoch']}{partial}: train loss {record['loss']:.4f}, "
          f"test accuracy {100 * record['test_accuracy']:.2f}% "
          f"({record['seconds']:.1f} s)", flush=True)


def join_cluster(args):
    """This process is one worker of a running cluster: the one of
    --coordinator, or without it the environment's (DistributedOptimizer
    reads LOCO_COORDINATOR and the rest for what the flags do not give)."""
    given = dict(insecure=args.insecure or None, tls_ca=args.tls_ca,
                 auth_token_file=args.auth_token_file, name=args.name,
                 metrics_port=args.metrics_port)
    connection = {k: v for k, v in given.items() if v is not None}
    connection["coordinator"] = args.coordinator
    if args.metrics_port is not None:
        connection["metrics_host"] = args.metrics_host
    where = args.coordinator or os.environ["LOCO_COORDINATOR"] + " ($LOCO_COORDINATOR)"
    print(f"joining the cluster of {where} (step 0 waits for {args.workers} "
          f"worker(s)), codec {args.codec}"
          + (f" ({args.bits} bits)" if args.codec in ("naive", "ef", "loco") else "")
          + f", batch {args.batch_size} per worker", flush=True)
    started = time.monotonic()
    done = {}

    def report(kind, record):
        if kind == "epoch":
            print_epoch(record)
        else:
            done.update(record)

    train(args, connection, report)
    traffic = done["traffic"]
    print(f"done: pushed {traffic['push_wire_bytes'] / 2**20:.1f} MiB of gradients (as fp32: "
          f"{traffic['push_fp32_bytes'] / 2**20:.1f} MiB); wall time "
          f"{time.monotonic() - started:.1f} s", flush=True)
    return 0


def main(argv):
    args = parse_args(argv)
    if args.joined:
        return join_cluster(args)
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
                print_epoch(record)
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
        print("error: the worker of rank 0 reported no epoch (see above)", file=sys.stderr)
        return 1
    print(f"final test accuracy {100 * final['test_accuracy']:.2f}% after {steps_done} "
          f"steps ({final['epoch']} epoch(s)); pushed {wire / 2**20:.1f} MiB of gradients (as fp32: "
          f"{fp32 / 2**20:.1f} MiB); wall time {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
