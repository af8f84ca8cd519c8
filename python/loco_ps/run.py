"""Runs a training script as the workers of a local LoCo-PS cluster.

    /usr/bin/python3 -m loco_ps.run --workers 4 train.py [its arguments]

Starts a coordinator and --servers parameter servers (loco_ps.Cluster, on
free ports of 127.0.0.1), then --workers processes of
`python3 train.py [its arguments]`. Each finds the cluster in its
environment, as loco-worker and the Kubernetes pods do:

    LOCO_COORDINATOR       the coordinator's host:port
    LOCO_INSECURE          true (the local cluster is plaintext on loopback)
    LOCO_WAIT_FOR_WORKERS  the number of workers, so that step 0 waits for all
    LOCO_NAME              worker-<i>, in the coordinator's logs
    LOCO_LOCAL_RANK        i, for the script's own use (a GPU to pick)
    LOCO_METRICS_PORT      0 (none), or with --metrics -1 (any free port)

so that `loco_ps.torch.DistributedOptimizer(model)`, without a coordinator,
joins it; the same script then runs unchanged as a Kubernetes worker.

With --coordinator HOST:PORT it starts no cluster: the workers join that
one, which runs elsewhere (loco-launch, Kubernetes, or Cluster on another
machine), so that each machine of a multi-machine run starts its own
workers with the same command:

    /usr/bin/python3 -m loco_ps.run --coordinator 10.0.0.1:7000 --workers 8 \
        --wait-for-workers 32 train.py [its arguments]

Then the caller's connection settings (LOCO_INSECURE, LOCO_TLS_CA,
LOCO_AUTH_TOKEN_FILE, LOCO_TLS_CERT, LOCO_TLS_KEY, LOCO_TLS_SERVER_NAME,
LOCO_METRICS_HOST) reach the workers as they are; LOCO_WAIT_FOR_WORKERS is
--wait-for-workers (the whole cluster's workers; default: the caller's
LOCO_WAIT_FOR_WORKERS, else --workers) and LOCO_NAME is
<--name-prefix>-worker-<i> (default prefix: this machine's host name).

Every line a worker prints comes out prefixed with "[worker-<i>] ". The
run exits 0 once every worker exited 0. When one fails, the others are
stopped and the run exits with its status (1 for a signal), naming it; on
Ctrl-C they are stopped and it exits 130. The cluster stops in every case.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from loco_ps._environment import setting_from_environment

# How long workers get to end after SIGTERM, and after the first failure.
_STOP_GRACE_S = 10.0
# The variables of a connection to another cluster, emptied for the workers.
_CLUSTER_ELSEWHERE = ("LOCO_TLS_CA", "LOCO_AUTH_TOKEN_FILE", "LOCO_TLS_CERT", "LOCO_TLS_KEY",
                      "LOCO_TLS_SERVER_NAME")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m loco_ps.run",
        description="Runs a training script as the workers of a local LoCo-PS cluster, or "
                    "(--coordinator) as this machine's workers of a running one.",
        epilog="The script finds the cluster in $LOCO_COORDINATOR (and $LOCO_INSECURE, "
               "$LOCO_WAIT_FOR_WORKERS, $LOCO_NAME, $LOCO_LOCAL_RANK): "
               "loco_ps.torch.DistributedOptimizer(model) joins it without a coordinator "
               "argument.")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes of the script (default 2)")
    parser.add_argument("--servers", type=int, default=None,
                        help="parameter servers of the local cluster, one shard each "
                             "(default 1)")
    parser.add_argument("--pull-codec", default=None, choices=("fp32", "bf16", "delta"),
                        help="how the local cluster's servers send parameters back (default: "
                             "the servers', delta)")
    parser.add_argument("--log-dir", default=None,
                        help="keep the local cluster's coordinator and server logs here "
                             "(default: a temporary folder, removed at the end)")
    parser.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                        help="join the cluster of this coordinator instead of starting one; "
                             "the caller's LOCO_INSECURE, LOCO_TLS_* and LOCO_AUTH_TOKEN_FILE "
                             "reach the workers")
    parser.add_argument("--wait-for-workers", type=int, default=None,
                        help="with --coordinator: the workers step 0 waits for, in the whole "
                             "cluster (default: $LOCO_WAIT_FOR_WORKERS, else --workers)")
    parser.add_argument("--name-prefix", default=None,
                        help="with --coordinator: the workers are named "
                             "<prefix>-worker-<i> (default: this machine's host name)")
    parser.add_argument("--metrics", action="store_true",
                        help="the workers serve Prometheus /metrics on free ports "
                             "(LOCO_METRICS_PORT=-1: DistributedOptimizer.metrics_address "
                             "says where); so do the local cluster's coordinator and servers, "
                             "printed at the start")
    parser.add_argument("script", help="the training script (run with this interpreter)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="its arguments, passed as they are")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: need at least 1 worker")
    if args.coordinator is None:
        _check_local_flags(parser, args)
    else:
        _check_joining_flags(parser, args)
    if not os.path.isfile(args.script):
        parser.error(f"{args.script}: no such file (the training script to run)")
    return args


def _check_local_flags(parser, args):
    """The flags of a run with a local cluster; sets its default --servers."""
    for flag, value in (("--wait-for-workers", args.wait_for_workers),
                        ("--name-prefix", args.name_prefix)):
        if value is not None:
            parser.error(f"{flag} is for joining a running cluster (--coordinator); the "
                         f"local cluster's step 0 waits for its --workers, named worker-<i>")
    args.servers = 1 if args.servers is None else args.servers
    if args.servers < 1:
        parser.error(f"--servers {args.servers}: need at least 1 server")


def _check_joining_flags(parser, args):
    """The flags of a run that joins --coordinator's cluster; sets the
    defaults of --wait-for-workers and --name-prefix."""
    for flag, value in (("--servers", args.servers), ("--pull-codec", args.pull_codec),
                        ("--log-dir", args.log_dir)):
        if value is not None:
            parser.error(f"{flag} is for the local cluster; with --coordinator the cluster "
                         f"is already running")
    host, colon, port = args.coordinator.rpartition(":")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        parser.error(f"--coordinator {args.coordinator!r}: give the coordinator's host:port, "
                     f"the port in 1..65535 (e.g. 10.0.0.1:7000)")
    if args.wait_for_workers is None:
        # The caller's $LOCO_WAIT_FOR_WORKERS, read as its workers would.
        try:
            from_environment = setting_from_environment("wait_for_workers")
        except ValueError as refused:
            parser.error(f"{refused} (or give --wait-for-workers)")
        args.wait_for_workers = from_environment or args.workers
    if args.wait_for_workers < 1:
        parser.error(f"--wait-for-workers {args.wait_for_workers}: need at least 1 worker")
    if args.name_prefix is None:
        args.name_prefix = socket.gethostname() or "worker"
    if not args.name_prefix.strip() or any(c.isspace() for c in args.name_prefix):
        parser.error(f"--name-prefix {args.name_prefix!r}: give a name without spaces")


def _relay(stream, prefix, lock):
    """Copies `stream`'s lines to stdout, each after `prefix`."""
    for line in stream:
        with lock:
            sys.stdout.write(prefix + line if line.endswith("\n") else prefix + line + "\n")
            sys.stdout.flush()
    stream.close()


def _worker_environment(args, coordinator, i):
    """Worker i's environment: the local cluster's settings, or with
    --coordinator the caller's connection settings and the run's."""
    # A LOCO_METRICS_PORT would make every worker bind that one port: none,
    # or (--metrics) each a free one.
    metrics_port = "-1" if args.metrics else "0"
    if args.coordinator is not None:
        return dict(os.environ, LOCO_COORDINATOR=coordinator,
                    LOCO_WAIT_FOR_WORKERS=str(args.wait_for_workers),
                    LOCO_NAME=f"{args.name_prefix}-worker-{i}", LOCO_LOCAL_RANK=str(i),
                    LOCO_METRICS_PORT=metrics_port)
    # The caller's own LOCO_* settings of a cluster elsewhere do not apply
    # to this one (plaintext, no token): emptied, which counts as unset.
    env = dict(os.environ, **{name: "" for name in _CLUSTER_ELSEWHERE})
    env.update(LOCO_COORDINATOR=coordinator, LOCO_INSECURE="true",
               LOCO_WAIT_FOR_WORKERS=str(args.workers), LOCO_NAME=f"worker-{i}",
               LOCO_LOCAL_RANK=str(i), LOCO_METRICS_PORT=metrics_port,
               LOCO_METRICS_HOST="127.0.0.1")
    return env


def _start_workers(args, coordinator):
    """The worker processes, each with its relay thread."""
    lock = threading.Lock()
    # The workers die with this process even when it is killed, as the
    # cluster's processes do (loco_ps.Cluster).
    setpriv = shutil.which("setpriv")
    prefix = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    workers = []
    for i in range(args.workers):
        env = _worker_environment(args, coordinator, i)
        process = subprocess.Popen(prefix + [sys.executable, args.script, *args.script_args],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, env=env)
        relay = threading.Thread(target=_relay, args=(process.stdout, f"[worker-{i}] ", lock),
                                 daemon=True)
        relay.start()
        workers.append((process, relay))
    return workers


def _stop(workers):
    """SIGTERM to the workers still running; SIGKILL after the grace."""
    for process, _ in workers:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + _STOP_GRACE_S
    for process, _ in workers:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _supervise(workers):
    """Waits for the workers; the exit status of the run, and why when it
    is not 0."""
    while True:
        running = 0
        for i, (process, _) in enumerate(workers):
            code = process.poll()
            if code is None:
                running += 1
            elif code != 0:
                _stop(workers)
                how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
                return (1 if code < 0 else code), f"worker-{i} {how}; stopped the others"
        if running == 0:
            return 0, None
        time.sleep(0.05)


def _run_workers(args, coordinator):
    """Starts the workers and waits for them; (exit status, why or None)."""
    workers = _start_workers(args, coordinator)
    try:
        code, why = _supervise(workers)
    except KeyboardInterrupt:
        _stop(workers)
        code, why = 130, "interrupted: stopped the workers"
    for _, relay in workers:
        relay.join(timeout=5)
    return code, why


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.coordinator is not None:
        print(f"loco_ps.run: joining the cluster at {args.coordinator}: {args.workers} "
              f"worker(s) of {args.script} ({args.name_prefix}-worker-<i>; step 0 waits for "
              f"{args.wait_for_workers})", flush=True)
        code, why = _run_workers(args, args.coordinator)
    else:
        import loco_ps

        with loco_ps.Cluster(num_servers=args.servers, pull_codec=args.pull_codec,
                             log_dir=args.log_dir, metrics=args.metrics) as cluster:
            print(f"loco_ps.run: cluster at {cluster.coordinator} ({args.servers} server(s)); "
                  f"{args.workers} worker(s) of {args.script}", flush=True)
            for name, address in cluster.metrics_addresses.items():
                print(f"loco_ps.run: {name} metrics at http://{address}/metrics", flush=True)
            code, why = _run_workers(args, cluster.coordinator)
    if why:
        print(f"loco_ps.run: {why}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    # Ctrl-C reaches the workers too (one process group); this process then
    # stops what is left.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
