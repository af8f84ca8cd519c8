"""A LoCo-PS cluster on this machine, for experiments, notebooks and tests.

:class:`Cluster` starts a coordinator and ``num_servers`` parameter servers
as real processes (the ``loco-coordinator`` and ``loco-server`` programs)
listening on free loopback ports, and stops them when closed::

    import numpy as np
    import loco_ps

    with loco_ps.Cluster(num_servers=2, lr=1e-3) as cluster:
        with cluster.worker(codec="loco") as worker:
            params = np.zeros(10_000, dtype=np.float32)
            worker.join(params.size)
            worker.init_parameters(params)
            for _ in range(100):
                grads = compute_gradient(params)   # your model
                worker.step(grads, params)         # params updated in place

The servers run AdamW (with the hyperparameters given here) on the mean of
the workers' gradients; every worker of the cluster takes part in every
step. For a real deployment start the programs yourself (see the top
README) and give workers the coordinator's address.
"""

import atexit
import math
import operator
import os
import shutil
import signal
import subprocess
import tempfile
import time
import weakref

from loco_ps import _core

__all__ = ["Cluster", "ClusterStartError"]

_COORDINATOR = "loco-coordinator"
_SERVER = "loco-server"
_LOG_TAIL_LINES = 20
_STOP_GRACE_S = 5.0


# Clusters still running, stopped at interpreter exit by _stop_at_exit.
_running = weakref.WeakSet()


@atexit.register
def _stop_at_exit():
    # Workers first, so that they leave while their cluster still answers
    # (whichever exit handler, this or _core's, was registered first).
    _core._close_joined_workers()
    for cluster in list(_running):
        cluster.close()


class ClusterStartError(RuntimeError):
    """A process of a local :class:`Cluster` did not start; the message ends
    with the last lines of its log."""


def find_program(name, bin_dir=None):
    """The path of the LoCo-PS program ``name``.

    Looked up only in ``bin_dir`` when given, else only in ``$LOCO_BIN_DIR``
    when that is set (a folder named on purpose is never passed over for
    another build's programs); else in the build tree next to this package
    (``build/bin`` when the package is ``build/python/loco_ps``), then on
    ``PATH``. Raises FileNotFoundError saying where it looked.
    """
    named = None
    if bin_dir is not None:
        named = (os.fspath(bin_dir), "bin_dir")
    elif os.environ.get("LOCO_BIN_DIR"):
        named = (os.environ["LOCO_BIN_DIR"], "$LOCO_BIN_DIR")
    if named is not None:
        place, what = named
        path = os.path.join(place, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise FileNotFoundError(
            f"{name} not found in {place} ({what}); build it (scripts/build.sh) and point "
            f"{what} at the folder that holds it (build/bin)")
    package_dir = os.path.dirname(os.path.abspath(__file__))
    build_bin = os.path.join(os.path.dirname(os.path.dirname(package_dir)), "bin")
    path = os.path.join(build_bin, name)
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        f"{name} not found in {build_bin} or on PATH; build it (scripts/build.sh) or set "
        f"LOCO_BIN_DIR to the folder that holds it")


def _integer(name, value, minimum=None):
    """`value` as an int; TypeError naming `name` for anything that is not
    an integer (1.7 is not taken as 1), ValueError below `minimum`."""
    if isinstance(value, bool):
        raise TypeError(f"{name}={value!r} is a bool, not an integer")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}={value!r} is a {type(value).__name__}, not an "
                        "integer") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{name}={value!r} must be >= {minimum}")
    return number


def _real(name, value):
    """`value` as a finite float; TypeError or ValueError naming `name`."""
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"{name}={value!r} is a {type(value).__name__}, not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}={value!r} is a {type(value).__name__}, not a "
                        "number") from None
    if not math.isfinite(number):
        raise ValueError(f"{name}={value!r} is not finite")
    return number


def _pair(name, value):
    """`value` as a pair of finite floats; TypeError or ValueError naming `name`."""
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        items = tuple(value)
    except TypeError:
        raise TypeError(f"{name}={value!r} is a {type(value).__name__}; give a pair "
                        "(beta1, beta2)") from None
    if len(items) != 2:
        raise ValueError(f"{name}={value!r} has {len(items)} element(s); give a pair "
                         "(beta1, beta2)")
    return tuple(_real(f"{name}[{i}]", v) for i, v in enumerate(items))


def _check_tokens(auth_token_file, worker_token_file, server_token_file):
    """ValueError unless the tokens are the shared one, both role tokens,
    or none."""
    if (worker_token_file is None) != (server_token_file is None):
        given, missing = (("worker_token_file", "server_token_file")
                          if server_token_file is None
                          else ("server_token_file", "worker_token_file"))
        raise ValueError(f"{given} without {missing}: separated roles need both tokens "
                         "(or neither)")
    if worker_token_file is not None and auth_token_file is not None:
        raise ValueError("auth_token_file cannot be combined with worker_token_file and "
                         "server_token_file: the shared token would grant both roles")


def _optional_path(path):
    return None if path is None else os.fspath(path)


def _number(value):
    # Round-trip precision: the server parses exactly the value given here.
    return f"{float(value):.17g}"


def _child_environment():
    # The programs also read every flag from a LOCO_* variable; the flags
    # given here must be all that configures them.
    return {k: v for k, v in os.environ.items() if not k.startswith("LOCO_")}


def _log_tail(path, lines=_LOG_TAIL_LINES):
    try:
        with open(path, errors="replace") as log:
            return "".join(log.readlines()[-lines:]).rstrip()
    except OSError as e:
        return f"(log unreadable: {e})"


def _stop(processes):
    """SIGTERM to every process still running (in reverse start order:
    servers before the coordinator), then SIGKILL to those still running
    after the grace period."""
    for process in reversed(processes):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_S
    for process in reversed(processes):
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    processes.clear()


class _Process:
    """One started program with its log file."""

    def __init__(self, name, argv, log_path):
        self.name = name
        self.log_path = log_path
        command = list(argv)
        # The child dies with this process even when it is killed (a test
        # run over its time limit), instead of serving on forever.
        setpriv = shutil.which("setpriv")
        if setpriv:
            command = [setpriv, "--pdeathsig", "KILL", "--"] + command
        with open(log_path, "wb") as log:
            self.popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, env=_child_environment())

    def wait_listening(self, deadline, what="LISTENING"):
        """The address from the program's "LISTENING host:port" line (or
        another such line: "METRICS"); raises ClusterStartError when it
        exits first or `deadline` passes."""
        while True:
            with open(self.log_path, errors="replace") as log:
                for line in log:
                    if line.startswith(what + " "):
                        return line.split(None, 1)[1].strip()
            code = self.popen.poll()
            if code is not None:
                raise ClusterStartError(
                    f"{self.name} exited with status {code} before serving; its log "
                    f"({self.log_path}) ends with:\n{_log_tail(self.log_path)}")
            if time.monotonic() > deadline:
                raise ClusterStartError(
                    f"{self.name} did not start serving in time; its log ({self.log_path}) "
                    f"ends with:\n{_log_tail(self.log_path)}")
            time.sleep(0.01)


class Cluster:
    """A coordinator and ``num_servers`` parameter servers, as processes on
    this machine, listening on free ports of 127.0.0.1.

    Args:
        num_servers: shards of the model, one server each.
        lr, betas, eps, weight_decay: the servers' AdamW hyperparameters
            (decoupled weight decay, as torch.optim.AdamW), applied to the
            mean of the workers' gradients.
        max_grad_norm: clip each shard's mean gradient to this norm (0: off).
        pull_codec: how the servers send parameters back: "fp32", "bf16" or
            "delta" (8-bit deltas with periodic fp32 syncs; the servers'
            default). None keeps the servers' default.
        pull_bits, full_sync_every: the delta codec's bits and fp32 period
            (None: the servers' defaults).
        auth_token_file: a file holding a bearer token every call must carry.
        worker_token_file, server_token_file: instead of auth_token_file,
            one token per role, both or neither (separated roles, as in
            production: a worker token cannot act as a server, and each
            shard call must carry its worker's Join ticket). The cluster's
            servers present the server token; :meth:`worker` presents the
            worker token.
        insecure: plaintext gRPC on loopback (the default). With False, pass
            the TLS flags in ``coordinator_args`` / ``server_args``.
        checkpoint_dir: folder for the servers' checkpoints (each restores
            the newest one when started).
        heartbeat_timeout_ms: how long the coordinator waits for a silent
            worker before removing it (None: its default, 5 s).
        server_args, coordinator_args: more command-line flags, e.g.
            ``["--checkpoint-every=10"]``.
        bin_dir: folder of the programs (default: ``$LOCO_BIN_DIR`` when
            set, else the build tree, then PATH).
        log_dir: where the processes' logs go (default: a temporary folder,
            removed on close).
        start_timeout_s: how long each process may take to start serving.
        metrics: serve each process's Prometheus metrics on a free port of
            127.0.0.1 (``--metrics-port=-1``); :attr:`metrics_addresses`
            says where.

    Raises ClusterStartError (with the end of the failing process's log)
    when a process does not start, and stops the others; the logs are then
    kept.

    Use as a context manager, or call :meth:`close`; the processes are also
    stopped when the Cluster is garbage collected, at interpreter exit, and
    (where ``setpriv`` is installed) when this process dies. Note the last:
    Linux ties it to the thread that started them, so create the Cluster on
    a thread that lives as long as it.
    """

    def __init__(self, num_servers=1, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, max_grad_norm=0.0, pull_codec=None, pull_bits=None,
                 full_sync_every=None, auth_token_file=None, worker_token_file=None,
                 server_token_file=None, insecure=True, checkpoint_dir=None,
                 heartbeat_timeout_ms=None, server_args=(), coordinator_args=(), bin_dir=None,
                 log_dir=None, start_timeout_s=30.0, metrics=False):
        # Every argument is checked before anything is started or created.
        num_servers = _integer("num_servers", num_servers, minimum=1)
        betas = _pair("betas", betas)
        lr, eps, weight_decay, max_grad_norm = (
            _real(name, value) for name, value in (("lr", lr), ("eps", eps),
                                                   ("weight_decay", weight_decay),
                                                   ("max_grad_norm", max_grad_norm)))
        pull_bits = None if pull_bits is None else _integer("pull_bits", pull_bits)
        full_sync_every = (None if full_sync_every is None
                           else _integer("full_sync_every", full_sync_every))
        heartbeat_timeout_ms = (None if heartbeat_timeout_ms is None
                                else _integer("heartbeat_timeout_ms", heartbeat_timeout_ms,
                                              minimum=1))
        if pull_codec is not None and not isinstance(pull_codec, str):
            raise TypeError(f"pull_codec={pull_codec!r} is a {type(pull_codec).__name__}; give "
                            "\"fp32\", \"bf16\", \"delta\" or None")
        _check_tokens(auth_token_file, worker_token_file, server_token_file)
        if not isinstance(metrics, bool):
            raise TypeError(f"metrics={metrics!r} is not a bool; give True (serve the "
                            "processes' /metrics on free ports) or False")
        self.num_servers = int(num_servers)
        self.lr = float(lr)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.max_grad_norm = float(max_grad_norm)
        self.pull_codec = pull_codec
        self.auth_token_file = _optional_path(auth_token_file)
        self.worker_token_file = _optional_path(worker_token_file)
        self.server_token_file = _optional_path(server_token_file)
        self.insecure = bool(insecure)
        self.coordinator = None
        self.server_addresses = []
        # "coordinator", "server-<shard>" -> "host:port" of its /metrics.
        self.metrics_addresses = {}
        self._metrics = metrics
        coordinator_program = find_program(_COORDINATOR, bin_dir)
        server_program = find_program(_SERVER, bin_dir)

        self._open_log_dir(log_dir)
        security = self._security_flags()
        coordinator_argv = ([coordinator_program]
                            + self._coordinator_flags(security, heartbeat_timeout_ms)
                            + [str(a) for a in coordinator_args])
        server_flags = (self._server_flags(security, pull_bits, full_sync_every, checkpoint_dir)
                        + [str(a) for a in server_args])
        self._start_processes(coordinator_argv, server_program, server_flags, start_timeout_s)

    def _open_log_dir(self, log_dir):
        """Makes the log folder (a temporary one, removed on close, when
        `log_dir` is None) and ties the processes' fate to this object's."""
        self._owns_log_dir = log_dir is None
        self.log_dir = tempfile.mkdtemp(prefix="loco_ps-cluster-") if log_dir is None \
            else os.fspath(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        self._processes = []  # Popen objects, in start order
        # On garbage collection. Not at exit: _stop_at_exit does that, after
        # the workers' close (and weakref.finalize does nothing once its own
        # exit handler has run).
        self._finalizer = weakref.finalize(self, Cluster._release, self._processes,
                                           self._owned_log_dir())
        self._finalizer.atexit = False
        _running.add(self)

    def _security_flags(self):
        """The transport and token flags, the same for every process."""
        security = ["--insecure"] if self.insecure else []
        if self.auth_token_file is not None:
            security.append(f"--auth-token-file={self.auth_token_file}")
        if self.worker_token_file is not None:
            security += [f"--worker-token-file={self.worker_token_file}",
                         f"--server-token-file={self.server_token_file}"]
        return security

    def _coordinator_flags(self, security, heartbeat_timeout_ms):
        flags = ["--host=127.0.0.1", "--port=0", f"--num-servers={self.num_servers}"] + security
        if heartbeat_timeout_ms is not None:
            timeout = heartbeat_timeout_ms
            flags += [f"--heartbeat-timeout-ms={timeout}",
                      f"--heartbeat-interval-ms={max(1, timeout // 5)}"]
        return flags

    def _server_flags(self, security, pull_bits, full_sync_every, checkpoint_dir):
        """The flags every server gets (its address, shard and coordinator
        are added per server)."""
        flags = [f"--num-servers={self.num_servers}", f"--lr={_number(self.lr)}",
                 f"--beta1={_number(self.betas[0])}", f"--beta2={_number(self.betas[1])}",
                 f"--eps={_number(self.eps)}", f"--weight-decay={_number(self.weight_decay)}",
                 f"--max-grad-norm={_number(self.max_grad_norm)}"] + security
        if self.pull_codec is not None:
            flags.append(f"--pull-codec={self.pull_codec}")
        if pull_bits is not None:
            flags.append(f"--pull-bits={int(pull_bits)}")
        if full_sync_every is not None:
            flags.append(f"--full-sync-every={int(full_sync_every)}")
        if checkpoint_dir is not None:
            flags.append(f"--checkpoint-dir={os.fspath(checkpoint_dir)}")
        return flags

    def _start_processes(self, coordinator_argv, server_program, server_flags, start_timeout_s):
        """The coordinator, then the servers once it listens; each given
        start_timeout_s to listen. On failure, stops what started and keeps
        the logs (the message names them)."""
        try:
            deadline = time.monotonic() + start_timeout_s
            metrics = ["--metrics-port=-1"] if self._metrics else []
            coordinator = self._start("coordinator", coordinator_argv + metrics)
            self.coordinator = coordinator.wait_listening(deadline)
            servers = [self._start(f"server-{shard}",
                                   [server_program, "--host=127.0.0.1", "--port=0",
                                    f"--shard-id={shard}", f"--coordinator={self.coordinator}"]
                                   + server_flags + metrics)
                       for shard in range(self.num_servers)]
            deadline = time.monotonic() + start_timeout_s
            self.server_addresses = [server.wait_listening(deadline) for server in servers]
            if self._metrics:  # announced right after LISTENING
                for process in [coordinator] + servers:
                    self.metrics_addresses[process.name] = process.wait_listening(deadline,
                                                                                  "METRICS")
        except BaseException:
            # The processes go; the logs stay for the message's path.
            self._owns_log_dir = False
            self.close()
            raise

    def _start(self, name, argv):
        process = _Process(name, argv, os.path.join(self.log_dir, f"{name}.log"))
        self._processes.append(process.popen)
        return process

    def _owned_log_dir(self):
        return self.log_dir if self._owns_log_dir else None

    @staticmethod
    def _release(processes, owned_log_dir):
        _stop(processes)
        if owned_log_dir is not None:
            shutil.rmtree(owned_log_dir, ignore_errors=True)

    def worker(self, **options):
        """A :class:`loco_ps.Worker` for this cluster: its coordinator, its
        transport security and token (the worker token where roles are
        separated), plus ``options`` (codec, bits, name, advanced
        WorkerOptions fields)."""
        options.setdefault("insecure", self.insecure)
        token = self.worker_token_file or self.auth_token_file
        if token is not None:
            options.setdefault("auth_token_file", token)
        return _core.Worker(self.coordinator, **options)

    def log(self, name):
        """The log so far of "coordinator" or "server-<shard>"."""
        with open(os.path.join(self.log_dir, f"{name}.log"), errors="replace") as log:
            return log.read()

    @property
    def running(self):
        """Whether every process of the cluster is still running."""
        return bool(self._processes) and all(p.poll() is None for p in self._processes)

    def close(self):
        """Stops the processes (SIGTERM, then SIGKILL after 5 s) and removes
        the temporary log folder. Idempotent."""
        self._finalizer.detach()
        Cluster._release(self._processes, self._owned_log_dir())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "running" if self.running else "stopped"
        return (f"Cluster(coordinator={self.coordinator!r}, num_servers={self.num_servers}, "
                f"{state})")
