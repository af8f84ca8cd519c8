"""loco_ps.torch: a PyTorch optimizer whose AdamW runs on the LoCo-PS servers.

    import loco_ps.torch as lps
    opt = lps.DistributedOptimizer(model, coordinator="host:port", codec="loco", bits=4,
                                   lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    for x, y in loader:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()   # pushes the gradient; returns when the parameters hold step t + 1
    opt.close()      # leaves the cluster (also on garbage collection and at exit)

What happens where
------------------
* The parameters that require grad, in param-group order, live in ONE flat
  float32 tensor; each ``param.data`` is a view into it, and each
  ``param.grad`` a view into a second flat tensor (FlatParameters). step()
  hands numpy views of both to the worker: it reads the gradient and writes
  the updated parameters in place, with no copy. Parameters with
  ``requires_grad=False`` are neither sent nor updated.
* A parameter whose ``.grad`` is None at step() counts as a zero gradient
  (the servers still apply weight decay and the moments to it, as one
  AdamW over the whole flat vector does; torch.optim.AdamW would skip it).
  The ``.grad`` views exist from construction on, so a fresh optimizer's
  gradients are zeros, not None, and a step() before any backward is a
  step with a zero gradient.
* The cluster's copy of the parameters is authoritative. step() refuses
  (RuntimeError, nothing pushed) when the parameters changed since the
  cluster last wrote them (a model.load_state_dict or an in-place
  re-initialisation after construction: checked on a sample of elements),
  and when requires_grad changed (the layout is fixed at construction).
* The servers run AdamW (decoupled weight decay, bias-corrected, PyTorch's
  ordering) on the mean of the workers' gradients; the moments live there.
  Before every step the param groups' lr, betas, eps and weight_decay are
  sent as flat ranges, so a change of ``param_groups[i]["lr"]`` (by hand or
  by any torch.optim.lr_scheduler) takes effect at the next step.
* The first worker's model initialises the cluster's parameters (first
  writer wins); a later joiner's model is overwritten with the cluster's
  current parameters when the optimizer is built.
* Elastic membership: a worker the coordinator expired (stalled past the
  heartbeat timeout) joins again inside step(); the gradient of that step
  is dropped and the parameters hold the cluster's current copy. Cluster
  failures raise the loco_ps.ClusterError family; every wait is bounded by
  the worker's timeouts (rpc_timeout_ms, step_timeout_ms, ...).
* Buffers (BatchNorm running statistics, ...) are not parameters: by
  default every worker keeps its own; buffers="average" keeps the float32
  ones equal on every worker (the mean of the workers' after each step).
* overlap=True pushes each part of the gradient while backward is still
  running (see DistributedOptimizer). Off by default because it changes
  what may happen between backward() and step().
"""

import atexit
import threading
import time
import warnings
import weakref
from contextlib import contextmanager

import torch

from . import _core
from ._arguments import buffers_to_average, check_arguments, trainable, worker_bits
from ._environment import connection_from_environment
from ._flat_params import FlatParameters
from ._overlapped_step import OverlappedStep
from ._step_hyper import (UNSUPPORTED_FLAGS, check_coverage, check_group, check_range_count,
                          group_hyper, hyper_ranges)
from ._step_checks import check_before_push, check_no_idle_member
from .errors import ClusterError, DeadlineExceededError

__all__ = ["DistributedOptimizer", "broadcast_buffers"]


class _Session:
    """The worker and the step in flight, shared with the finalizer (which
    must not reference the optimizer): release() ends both, once."""

    def __init__(self, worker, coordinator):
        self.worker = worker
        self.coordinator = coordinator
        self.pending = None  # OverlappedStep in flight, if any
        # The thread that last started a step of this worker (None before
        # the first): _step_checks.check_no_idle_member.
        self.stepping_thread = None
        self._released = False
        self._lock = threading.Lock()
        _LIVE_SESSIONS.add(self)

    @property
    def released(self):
        return self._released

    def release(self, at_exit=False):
        """Aborts the step in flight, leaves (with retries) and closes the
        worker. At interpreter exit (`at_exit`) a call of another thread
        may be in progress, a daemon thread's step(): the worker is then
        closed as loco_ps._core closes its own at exit (Worker._close_at_exit:
        one bounded attempt to leave, and no wait for that call)."""
        with self._lock:
            if self._released:
                return
            self._released = True
        _LIVE_SESSIONS.discard(self)
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.abort("the optimizer was closed during backward")
        if at_exit:
            self.worker._close_at_exit()
            return
        try:
            # At exit, loco_ps._core may have closed its workers already.
            if not getattr(self.worker, "closed", False):
                self.worker.leave()
        except Exception as error:  # leaving is best effort: the coordinator expires us anyway
            warnings.warn(f"loco_ps: leaving the cluster failed: {error}", RuntimeWarning)
        finally:
            self.worker.close()


# Released at exit by _release_live_sessions, registered after loco_ps._core
# was imported and therefore run before _core's own exit hook closes the
# workers (atexit runs last-registered first): a step in flight is aborted
# before its worker is closed. (The optimizers' weakref.finalize is not
# run at exit: its release would wait for a daemon thread's step.)
_LIVE_SESSIONS = weakref.WeakSet()


def _release_live_sessions():
    for session in list(_LIVE_SESSIONS):
        session.release(at_exit=True)


atexit.register(_release_live_sessions)


# The Worker options besides the named arguments that coordinator=None
# also takes from the environment (mutual TLS, the /metrics endpoint).
ADVANCED_FROM_ENVIRONMENT = ("tls_cert", "tls_key", "tls_server_name", "metrics_port",
                             "metrics_host")


class DistributedOptimizer(torch.optim.Optimizer):
    """AdamW whose update runs on the LoCo-PS parameter servers.

    Args:
      params: an nn.Module (its parameters, named in error messages by their
        names in module.named_parameters()), or what torch.optim.AdamW takes:
        an iterable of tensors or of param-group dicts with per-group lr,
        betas, eps and weight_decay. Trainable parameters must be dense
        floating-point tensors: contiguous float32 ones on the CPU are
        updated in place without copies; float16, bfloat16, float64, GPU
        or non-contiguous ones are staged through a float32 host copy (the
        servers keep the fp32 master; the model gets it rounded).
      coordinator: "host:port" of the coordinator (the second positional
        argument, where torch.optim.AdamW takes lr: a number there raises
        TypeError). None (the default): the connection comes from the
        environment, as loco-worker reads it and ``python3 -m loco_ps.run``
        sets it: $LOCO_COORDINATOR, and for each of insecure, tls_ca,
        auth_token_file, name and wait_for_workers not given its own
        variable ($LOCO_INSECURE, ...; loco_ps/_environment.py). With a
        coordinator given, nothing is read from the environment.
      codec, bits: gradient compression ("loco", "ef", "naive", "bf16",
        "fp32"; bits for the block codecs, ignored for fp32 and bf16).
      lr, betas, eps, weight_decay: the default hyper-parameters of the
        param groups, as torch.optim.AdamW.
      auth_token_file, insecure, tls_ca, name: how to reach and name
        ourselves to the cluster (insecure=True for plaintext local runs;
        None: False, or the environment's with coordinator=None).
      wait_for_workers: the construction returns once this many workers
        are members of the cluster (bounded by wait_timeout_s; None: 1, or
        $LOCO_WAIT_FOR_WORKERS with coordinator=None).
      overlap: push the gradient while backward runs. A backward pass then
        starts the step (its hooks report each finished parameter), so
        between backward() and step() the gradients must not be changed
        (no gradient clipping or unscaling there: use the servers'
        --max-grad-norm), and gradient accumulation over several backward
        passes must run all but the last under ``with opt.no_sync():``.
        The result is bit for bit that of overlap=False.
      buffers: None (the default: every worker keeps its own buffers, e.g.
        BatchNorm running statistics from the batches it saw), "average"
        (the floating-point buffers of the module given as `params`), or
        an nn.Module whose floating-point buffers to average (when `params`
        are param groups). Averaged buffers start as the first worker's (like the
        parameters) and after every step hold the mean of the workers'
        buffers, exactly with codec="fp32" and within the codec's rounding
        otherwise (the pushes carry each worker's change since the last
        step, compressed like gradients, with the same error feedback).
        The servers add the mean push to them instead of running AdamW
        (an "add_mean" group): no moments, no weight decay, not in the
        gradient norm. Integer buffers (num_batches_tracked) stay local.
      amsgrad, maximize, capturable, differentiable, foreach, fused: the
        rest of torch.optim.AdamW's keywords, so that a call written for it
        works unchanged. The servers run plain AdamW: the first four must
        stay False (True raises ValueError naming it); foreach and fused
        pick how torch would compute the update locally and have no effect
        here. Like AdamW's, they are kept in every param group.
      **worker_options: further loco_ps._core.Worker options
        (metrics_port and metrics_host to serve this worker's Prometheus
        metrics, rpc_timeout_ms, step_timeout_ms, join_timeout_ms, ...).
    """

    def __init__(self, params, coordinator=None, codec="loco", bits=4, lr=1e-3,
                 betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, auth_token_file=None,
                 insecure=None, tls_ca=None, name=None, wait_for_workers=None,
                 wait_timeout_s=600.0, overlap=False, buffers=None, amsgrad=False,
                 maximize=False, capturable=False, differentiable=False, foreach=None,
                 fused=None, **worker_options):
        self._session = None
        self._closed = True  # until the worker exists: close() and GC do nothing
        # Every local check runs before the worker joins: the first join fixes
        # the cluster's model size, so a join followed by a refusal here
        # would leave a corrected retry refused for its (right) size.
        if coordinator is None:
            given = dict(coordinator=None, insecure=insecure, tls_ca=tls_ca,
                         auth_token_file=auth_token_file, name=name,
                         wait_for_workers=wait_for_workers,
                         **{k: worker_options.get(k) for k in ADVANCED_FROM_ENVIRONMENT})
            settings = connection_from_environment(given)
            coordinator, insecure, tls_ca, auth_token_file, name, wait_for_workers = (
                settings[k] for k in ("coordinator", "insecure", "tls_ca", "auth_token_file",
                                      "name", "wait_for_workers"))
            worker_options.update({k: settings[k] for k in ADVANCED_FROM_ENVIRONMENT
                                   if settings[k] is not None})
        insecure = False if insecure is None else insecure
        wait_for_workers = 1 if wait_for_workers is None else wait_for_workers
        check_arguments(coordinator, wait_for_workers, wait_timeout_s)
        bits_for_worker = worker_bits(codec, bits)
        names = {}
        named_buffers = buffers_to_average(buffers, params)
        if isinstance(params, torch.nn.Module):
            names = {id(p): n for n, p in params.named_parameters()}
            params = list(params.parameters())
        if isinstance(betas, list):
            betas = tuple(betas)
        update_flags = dict(amsgrad=amsgrad, maximize=maximize, capturable=capturable,
                            differentiable=differentiable)
        for key in UNSUPPORTED_FLAGS:
            if update_flags[key]:
                raise ValueError(f"{key}=True: the servers run plain AdamW (without {key})")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, **update_flags,
                        foreach=foreach, fused=fused)
        check_group("the defaults (lr, betas, eps, weight_decay)", defaults)
        self._names = names
        self._layout_frozen = False
        super().__init__(params, defaults)
        self._layout_frozen = True
        for index, group in enumerate(self.param_groups):
            check_group(f"param_groups[{index}]", group)
        self._flat = FlatParameters(trainable(self.param_groups, names), named_buffers)
        self._overlap = bool(overlap)
        self._no_sync_depth = 0
        self._sent_hyper = None
        self._last_result = None
        self._hook_handles = []
        hyper = self._hyper_ranges()  # checked here; set_step_hyper needs a joined worker

        worker = _core.Worker(coordinator, codec=codec, bits=bits_for_worker,
                              auth_token_file=auth_token_file, insecure=insecure,
                              tls_ca=tls_ca, name=name, **worker_options)
        self._session = _Session(worker, coordinator)
        self._finalizer = weakref.finalize(self, self._session.release)
        self._finalizer.atexit = False  # _release_live_sessions instead
        self._closed = False
        try:
            worker.join(self._flat.num_elements)
            worker.set_step_hyper(hyper)
            self._sent_hyper = hyper
            worker.init_parameters(self._flat.values_array)
            self._flat.receive()
            self._wait_for_workers(wait_for_workers, wait_timeout_s)
        except BaseException:
            self.close()
            raise
        if self._overlap:
            self._register_hooks()

    # ------------------------------------------------------------ the step

    def step(self, closure=None):
        """Pushes the gradients and returns once the parameters hold the
        cluster's next version. `closure`, if given, recomputes the loss
        (with backward) first, and its value is returned."""
        self._check_open()
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        worker = self._session.worker
        try:
            check_no_idle_member(self._session, _LIVE_SESSIONS,
                                 started=self._session.pending is not None)
        except RuntimeError:
            pending, self._session.pending = self._session.pending, None
            if pending is not None:
                pending.abort("another member of the cluster on this thread is idle")
                self._flat.remember_values()
            raise
        pending, self._session.pending = self._session.pending, None
        self._flat.restore_value_views()
        if pending is None:
            if worker.expired:
                self._rejoin()
                return loss
            check_before_push(self._flat, self.param_groups, self._names)
            self._flat.sync_all_grads()
            self._flat.stage_buffers()
            self._send_hyper()
        try:
            if pending is None:
                result = worker.step(self._flat.grads_array, self._flat.values_array)
            else:
                result = pending.finish()
        except ClusterError:
            # FAILED_PRECONDITION once the heartbeat saw the expiry; a push
            # or pull refused for an unknown worker may come first.
            if not worker.expired:
                self._flat.remember_values()
                raise
            self._rejoin()
            return loss
        except BaseException:  # KeyboardInterrupt, ...
            self._flat.remember_values()
            raise
        self._flat.receive()
        self._last_result = dict(result)
        if self._last_result.get("resynced"):
            warnings.warn(f"loco_ps: step {self._last_result.get('step')} was not applied with "
                          "this worker's gradient: a shard refused its push (the cluster had "
                          "moved on without it, e.g. after an aborted or refused step) or the "
                          "shards disagreed on the version, so the worker resynchronised to "
                          f"the cluster's parameters (version {_held_step(worker)}) and this "
                          "step's gradient was dropped (where a shard had accepted it, that "
                          "shard applied its part)", RuntimeWarning, stacklevel=2)
        if self._last_result.get("nonfinite"):
            warnings.warn(f"loco_ps: step {self._last_result.get('step')} had "
                          f"{self._last_result['nonfinite']} non-finite gradient element(s); "
                          "they were sent as 0", RuntimeWarning)
        return loss

    def zero_grad(self, set_to_none=False):
        """Zeroes the flat gradient buffer. `set_to_none` is accepted for
        torch's signature but ignored: the gradients stay views of the
        flat buffer, which is what lets step() read them without a copy
        (a staged parameter's own .grad is zeroed in place)."""
        del set_to_none
        if self._session is not None and self._session.pending is not None:
            raise RuntimeError("zero_grad() while a step is in flight: with overlap=True, "
                               "backward() already started pushing this step's gradient; "
                               "call step() to complete it (or build the optimizer with "
                               "overlap=False to be able to skip steps)")
        self._flat.zero_grads()

    @contextmanager
    def no_sync(self):
        """Backward passes inside do not start a step (overlap=True): for
        gradient accumulation, run all but the last micro-batch here."""
        self._no_sync_depth += 1
        try:
            yield
        finally:
            self._no_sync_depth -= 1

    def add_param_group(self, param_group):
        if getattr(self, "_layout_frozen", False):
            raise RuntimeError("DistributedOptimizer cannot take a param group after it was "
                               "built: the cluster's flat layout is fixed at join")
        params = param_group["params"] if isinstance(param_group, dict) else None
        if params is not None and not isinstance(params, (torch.Tensor, set)):
            param_group["params"] = params = list(params)  # as torch does, once
        if isinstance(params, list):
            # torch only warns about a parameter twice in one group; the flat
            # layout holds each parameter once, so this is refused, as torch
            # refuses one in two groups.
            first, twice = {}, []
            for j, param in enumerate(params):
                if isinstance(param, torch.Tensor):
                    if id(param) in first:
                        twice.append((first[id(param)], j, param))
                    first.setdefault(id(param), j)
            if twice:
                names = getattr(self, "_names", {})
                group = len(self.param_groups)
                listed = ", ".join(
                    names.get(id(p), f"param_groups[{group}]['params'][{j}] (the tensor at "
                                     f"[{i}] again)")
                    for i, j, p in twice)
                raise ValueError(f"some parameters appear more than once in parameter group "
                                 f"{group}: {listed}; give each parameter once (the cluster's "
                                 "flat layout holds it once)")
        super().add_param_group(param_group)

    # ---------------------------------------------------- state and close

    def state_dict(self):
        """{'state': {}, 'param_groups': [...], 'loco_ps': {...}}: the param
        groups' hyper-parameters (as torch's optimizers keep them) and the
        cluster step this worker holds. The AdamW moments live on the
        servers; their checkpoints are the source of truth for them."""
        state = super().state_dict()
        state["state"] = {}
        worker = self._session.worker if not self._closed else None
        state["loco_ps"] = {"step": _held_step(worker) if worker is not None else None,
                            "num_elements": self._flat.num_elements}
        return state

    def load_state_dict(self, state_dict):
        """Restores the param groups' hyper-parameters (the next step sends
        them). Moments in `state_dict` (e.g. from torch.optim.AdamW) are
        ignored with a warning: the servers hold their own; the step is the
        cluster's."""
        if state_dict.get("state"):
            warnings.warn("loco_ps: the moments in this state_dict are ignored; the servers "
                          "hold the AdamW state (restore it from their checkpoints)",
                          RuntimeWarning)
            state_dict = dict(state_dict, state={})
        super().load_state_dict(state_dict)
        self.state.clear()
        for index, group in enumerate(self.param_groups):
            check_group(f"param_groups[{index}]", group)
        self._sent_hyper = None

    def close(self):
        """Leaves the cluster; idempotent. Also runs when the optimizer is
        garbage collected and at interpreter exit."""
        if self._closed:
            return
        self._closed = True
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles = []
        self._finalizer()

    def __enter__(self):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("a DistributedOptimizer cannot be pickled or copied: it is a member of "
                        "a cluster, and its parameters are views of its flat storage. Save "
                        "opt.state_dict() (the param groups) and the model's state_dict(); "
                        "the AdamW moments live on the servers (their checkpoints)")

    def __copy__(self):
        self.__reduce_ex__(None)

    def __deepcopy__(self, memo):
        self.__reduce_ex__(None)

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------- properties

    @property
    def worker(self):
        """The loco_ps._core.Worker (step, rank, world_size, traffic, ...)."""
        return self._session.worker

    @property
    def rank(self):
        return self._session.worker.rank

    @property
    def world_size(self):
        return self._session.worker.world_size

    @property
    def num_elements(self):
        """Elements in the flat layout (the trainable parameters)."""
        return self._flat.num_elements

    @property
    def last_step_result(self):
        """The dict the worker returned for the last completed step, or None."""
        return self._last_result

    @property
    def traffic(self):
        return self._session.worker.traffic

    @property
    def metrics_address(self):
        """"host:port" of this worker's /metrics endpoint (metrics_port=...),
        or None."""
        return self._session.worker.metrics_address

    # ------------------------------------------------------------ helpers

    def _check_open(self):
        if self._closed:
            raise RuntimeError("this DistributedOptimizer is closed")

    def _hyper_ranges(self):
        """The ranges for Worker.set_step_hyper, checked here (ValueError
        naming the group) as far as Python can: the values, that the
        ranges cover the flat layout in order, and their count. Run before
        the join too."""
        ranges = hyper_ranges(self.param_groups, self._flat)
        buffers = self._flat.num_elements > self._flat.param_elements
        if buffers:
            # The averaged buffers: added to, not optimised (the AdamW values
            # are ignored there but must be valid ones).
            ranges.append((self._flat.param_elements, self._flat.num_elements)
                          + group_hyper(self.defaults) + ("add_mean",))
        check_coverage(ranges, self._flat.num_elements)
        check_range_count(ranges, buffers)
        return ranges

    def _send_hyper(self):
        # The groups travel with every push of the following steps; they are
        # handed to the worker only when they changed (a scheduler, a hand
        # edit of param_groups, a new group).
        ranges = self._hyper_ranges()
        if ranges == self._sent_hyper:
            return
        self._session.worker.set_step_hyper(ranges)
        self._sent_hyper = ranges

    def _wait_for_workers(self, count, timeout_s):
        worker = self._session.worker
        deadline = time.monotonic() + timeout_s
        while worker.world_size < count:
            if time.monotonic() >= deadline:
                raise DeadlineExceededError(
                    f"waited {timeout_s:g} s for {count} workers to join the cluster; "
                    f"{worker.world_size} have (wait_for_workers={count})",
                    "DEADLINE_EXCEEDED")
            time.sleep(0.02)

    def _rejoin(self):
        worker = self._session.worker
        worker.rejoin(self._flat.values_array)
        self._flat.receive()
        self._sent_hyper = None
        warnings.warn(f"loco_ps: this worker had expired from the cluster; it joined again at "
                      f"step {_held_step(worker)} and this step's gradient was dropped",
                      RuntimeWarning)

    def _register_hooks(self):
        this = weakref.ref(self)
        with torch.enable_grad():
            for i, param in enumerate(self._flat.params):
                # The AccumulateGrad node's hook runs after .grad holds the
                # gradient; the node must be kept alive for the hook to stay.
                accumulator = param.expand_as(param).grad_fn.next_functions[0][0]

                def hook(*unused, i=i):
                    optimizer = this()
                    if optimizer is not None:
                        optimizer._on_grad_ready(i)

                self._hook_handles.append(_KeptHook(accumulator, accumulator.register_hook(hook)))

    def _on_grad_ready(self, i):
        if self._closed or self._no_sync_depth > 0:
            return
        session = self._session
        pending = session.pending
        if pending is None:
            if session.worker.expired:
                return  # step() rejoins and drops this gradient
            self._flat.restore_value_views()
            check_before_push(self._flat, self.param_groups, self._names)
            # Forward is over: the buffers are final before any gradient.
            self._flat.stage_buffers()
            self._send_hyper()
            pending = session.pending = OverlappedStep(session.worker, self._flat)
        elif pending.is_done(i):
            session.pending = None
            final_from = pending.final_from()
            pending.abort("a second backward pass reached the same step")
            # Its pulls may have written some shards' new values.
            self._flat.remember_values()
            if final_from == len(self._flat):
                outcome = ("nothing of this step had been pushed, and it was aborted: the "
                           "next step() starts it again")
            else:
                part = ("all of its gradient" if final_from == 0 else
                        f"the gradient of {self._flat.names[final_from]} and the parameters "
                        "after it")
                outcome = (f"{part} had been reported final by the first backward, so the "
                           "servers may already have applied this step with the first "
                           "backward's gradient (or will, once the other workers push), and "
                           "this worker's parameters may have changed while its version did "
                           "not; the second gradient is not applied. The next step() "
                           "resynchronises with the cluster and drops its own gradient "
                           "(with a RuntimeWarning)")
            raise RuntimeError(
                f"parameter {self._flat.names[i]} received a second gradient in the same "
                "step: with overlap=True a backward pass starts pushing the step, so "
                "gradient accumulation must run all but the last backward under "
                f"`with opt.no_sync():`. {outcome}")
        self._flat.sync_grad(i)
        pending.mark_done(i)


class _KeptHook:
    """A hook handle that also keeps its AccumulateGrad node alive."""

    def __init__(self, node, handle):
        self.node = node
        self.handle = handle

    def remove(self):
        self.handle.remove()
        self.node = None


def _held_step(worker):
    """The step the worker's next push is for: the version of the
    parameters it holds."""
    return int(worker.version)


def broadcast_buffers(model):
    """Points to the optimizer option that keeps buffers equal.

    Buffers (BatchNorm running mean/var, ...) are not parameters: by default
    every worker keeps its own. DistributedOptimizer(model, ...,
    buffers="average") carries the float32 buffers through the cluster with
    every step: they start as the first worker's and after each step hold
    the workers' mean. A stand-alone broadcast outside a step would need a
    collective of its own, which the parameter servers do not offer, so this
    function raises and names the option instead.
    """
    del model
    raise NotImplementedError(
        "loco_ps.torch.broadcast_buffers: build the optimizer with buffers=\"average\" "
        "(or buffers=model when params are param groups): the float32 buffers then start "
        "as the first worker's and after every step hold the mean of the workers' buffers")
