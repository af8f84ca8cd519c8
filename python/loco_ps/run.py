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

Each flag not typed is read from its environment variable (LOCO_WORKERS,
LOCO_COORDINATOR, ...: _run_flags.FLAGS, and README's configuration
table), so that a LOCO_COORDINATOR in the caller's environment makes the
run join that cluster.

Every line a worker prints comes out prefixed with "[worker-<i>] ". The
run exits 0 once every worker exited 0. When one fails, the others are
stopped and the run exits with its status (1 for a signal), naming it; on
Ctrl-C they are stopped and it exits 130. The cluster stops in every case.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from loco_ps import _run_flags

# How long workers get to end after SIGTERM, and after the first failure.
_STOP_GRACE_S = 10.0
# The variables of a connection to another cluster, emptied for the workers.
_CLUSTER_ELSEWHERE = ("LOCO_TLS_CA", "LOCO_AUTH_TOKEN_FILE", "LOCO_TLS_CERT", "LOCO_TLS_KEY",
                      "LOCO_TLS_SERVER_NAME")


def parse_args(argv, environ=None):
    """The run's settings: each flag, else its variable, else its default
    (_run_flags.FLAGS); exits 2 through argparse with a message for a bad
    one, before anything starts."""
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="python3 -m loco_ps.run",
        description="Runs a training script as the workers of a local LoCo-PS cluster, or "
                    "(--coordinator) as this machine's workers of a running one.",
        epilog="Each flag not typed is read from its environment variable (empty = unset). "
               "The script finds the cluster in $LOCO_COORDINATOR (and $LOCO_INSECURE, "
               "$LOCO_WAIT_FOR_WORKERS, $LOCO_NAME, $LOCO_LOCAL_RANK): "
               "loco_ps.torch.DistributedOptimizer(model) joins it without a coordinator "
               "argument.")
    for flag in _run_flags.FLAGS:
        default = "empty" if flag.default is None else str(flag.default).lower()
        help_text = f"{flag.help} (${flag.variable}; default {default})"
        if flag.kind == "bool":
            parser.add_argument(flag.flag, action="store_true", help=help_text)
        else:
            parser.add_argument(flag.flag, default=None, help=help_text,
                                metavar="HOST:PORT" if flag.kind == "address" else None,
                                choices=flag.kind if isinstance(flag.kind, tuple) else None)
    parser.add_argument("script", help="the training script (run with this interpreter)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="its arguments, passed as they are")
    args = parser.parse_args(argv)
    by_flag = {flag.flag: flag for flag in _run_flags.FLAGS}
    typed_coordinator = args.coordinator is not None
    _run_flags.resolve(parser, args, environ, [by_flag["--coordinator"]])
    joining = args.coordinator is not None
    args.coordinator_source = "" if typed_coordinator or not joining else " ($LOCO_COORDINATOR)"
    _run_flags.refuse_or_note_other_mode(
        parser, args, environ, joining,
        lambda note: print(f"loco_ps.run: {note}", file=sys.stderr, flush=True))
    _run_flags.resolve(parser, args, environ,
                       [flag for flag in _run_flags.FLAGS
                        if flag.mode in ("both", "joining" if joining else "local")
                        and flag.flag != "--coordinator"])
    if joining:
        # --wait-for-workers counts the whole cluster; this machine's
        # workers by default. The host name tells machines apart in logs.
        args.wait_for_workers = args.wait_for_workers or args.workers
        args.name_prefix = args.name_prefix or _run_flags.default_name_prefix()
    if not os.path.isfile(args.script):
        parser.error(f"{args.script}: no such file (the training script to run)")
    return args


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
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--print-config-markdown"]:
        print("\n".join(_run_flags.markdown_rows()))
        return 0
    args = parse_args(argv)
    if args.coordinator is not None:
        print(f"loco_ps.run: joining the cluster at {args.coordinator}{args.coordinator_source}: "
              f"{args.workers} "
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
