"""FlatParameters: a model's trainable parameters as one flat float32 vector.

The cluster sees a model as one flat fp32 vector (docs/DESIGN.md §3). This
class packs the parameters that require grad, in the order given, into ONE
contiguous float32 tensor and makes each parameter's ``.data`` a view into
it; a second flat tensor holds the gradients, each parameter's ``.grad`` a
view into it. The worker then reads the gradients and writes the updated
parameters through numpy views of these two tensors: nothing is copied on
the way in or out.

A parameter that cannot be such a view (float16, bfloat16 or float64, on a
GPU, or not contiguous) is *staged*: it keeps its own storage, its slice of
the flat vector is a float32 copy, its gradient is copied (and converted)
into the flat gradient by :meth:`sync_grad`, and :meth:`receive` writes the
cluster's new values back into it, rounded to its dtype. The servers' fp32
master is then what a mixed-precision trainer keeps beside a half-precision
model.

Autograd accumulates into an existing ``.grad`` in place, so the gradient
lands in the flat buffer directly. When something replaced a ``.grad`` (a
``zero_grad(set_to_none=True)`` of the module, ``create_graph=True``) or set
it to None, :meth:`sync_grad` copies it back into the flat buffer (None counts
as a zero gradient) and points ``.grad`` at the view again.

Buffers to average (DistributedOptimizer(buffers="average")) follow the
parameters in the flat layout, but keep their own storage: the flat values
there hold the copy the cluster last returned, and the gradient there is
what the worker pushes for them, its buffer minus that copy
(:meth:`stage_buffers`); the servers add the mean push (an "add_mean"
group), so every worker receives the mean of the workers' buffers, which
:meth:`receive` copies back.

The worker is handed numpy views of the two flat tensors made at each use
(values_array, grads_array), never cached ones: model.share_memory() moves
the tensors' storage. changed_since_receive() tells which parameters were
changed outside a step since the cluster last wrote them, from a sample of
their elements (see there).

Thread safety: none of its own. Its owner calls it from the training thread;
while a step runs in the background, that step reads the gradient elements
already reported final and the training thread writes only the others.
"""

import bisect
import warnings

import numpy as np
import torch


# Parameter dtypes the flat float32 vector holds, directly or staged.
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


# Signed integers of each floating dtype's size: probes compare bits, so
# that a NaN the cluster wrote compares equal to itself.
_BITS_DTYPES = {torch.float32: torch.int32, torch.float64: torch.int64,
                torch.float16: torch.int16, torch.bfloat16: torch.int16}


def _bits(tensor):
    """`tensor`'s elements' bits, flattened, as int64."""
    return tensor.reshape(-1).contiguous().view(_BITS_DTYPES[tensor.dtype]).to(torch.int64)


def check_parameter(name, param):
    """Raises TypeError naming `name` unless `param` can live in the flat
    float32 vector, directly or staged."""
    if not isinstance(param, torch.Tensor):
        raise TypeError(f"parameter {name} is a {type(param).__name__}, not a torch.Tensor")
    if param.layout != torch.strided:
        raise TypeError(f"parameter {name} has layout {param.layout}; loco_ps handles dense "
                        "(torch.strided) parameters only, sparse ones are not supported")
    if param.dtype not in FLOAT_DTYPES:
        raise TypeError(f"parameter {name} has dtype {param.dtype}; the cluster trains "
                        "floating-point parameters (float32, or float16, bfloat16 and float64 "
                        "through a float32 copy)")


def is_staged(param):
    """True when `param` cannot be a view of the flat float32 host vector."""
    return not (param.dtype == torch.float32 and param.device.type == "cpu"
                and param.is_contiguous())


def check_buffer(name, buffer):
    """Raises TypeError naming `name` unless `buffer` can be averaged
    through the flat float32 vector (any device; copied either way)."""
    if buffer.dtype not in FLOAT_DTYPES:
        raise TypeError(f"buffer {name} has dtype {buffer.dtype}; only floating-point buffers "
                        "(float32, float16, bfloat16, float64) are averaged (integer ones, such "
                        "as num_batches_tracked, stay local)")


class FlatParameters:
    """Owns the flat value and gradient buffers of `named_params`, a list of
    (name, parameter) pairs in layout order; every parameter must pass
    check_parameter and appear once. `named_buffers` (name, tensor) pairs
    follow in the layout, averaged across workers (see above)."""

    def __init__(self, named_params, named_buffers=()):
        for name, param in named_params:
            check_parameter(name, param)
        for name, buffer in named_buffers:
            check_buffer(name, buffer)
        self.names = [name for name, _ in named_params]
        self.params = [param for _, param in named_params]
        self.buffer_names = [name for name, _ in named_buffers]
        self.buffers = [buffer for _, buffer in named_buffers]
        self.begins = []
        total = 0
        for param in self.params:
            self.begins.append(total)
            total += param.numel()
        # [param_elements, num_elements): the buffers, in order.
        self.param_elements = total
        self.buffer_begins = []
        for buffer in self.buffers:
            self.buffer_begins.append(total)
            total += buffer.numel()
        self.num_elements = total
        self._index = {id(param): i for i, param in enumerate(self.params)}
        self.staged = [is_staged(param) for param in self.params]
        self.values = torch.empty(total, dtype=torch.float32)
        self.grads = torch.zeros(total, dtype=torch.float32)
        self._pack()
        self._warned_replaced = set()
        self._plan_probes()
        self._probed = None  # the probes' bits at the last receive(); None before it

    # numpy views of the two flat tensors, handed to the worker. Made anew on
    # every use, never cached: a numpy array keeps the data pointer it was
    # made with, while the tensors' storage may move under it
    # (model.share_memory() moves every parameter's storage, and with it
    # these flat tensors, into shared memory and frees the old memory). A
    # view costs about a microsecond.
    @property
    def values_array(self):
        return self.values.numpy()

    @property
    def grads_array(self):
        return self.grads.numpy()

    def __len__(self):
        return len(self.params)

    def index(self, param):
        """The position of `param` in the layout, or None when it is not in it."""
        return self._index.get(id(param))

    def begin(self, i):
        """The flat offset of parameter `i`; begin(len(self)) is the end."""
        return self.begins[i] if i < len(self.params) else self.num_elements

    def end(self, i):
        return self.begins[i] + self.params[i].numel()

    def value_view(self, i):
        return self.values[self.begin(i):self.end(i)].view(self.params[i].shape)

    def grad_view(self, i):
        return self.grads[self.begin(i):self.end(i)].view(self.params[i].shape)

    def _pack(self):
        with torch.no_grad():
            for i, param in enumerate(self.params):
                self.value_view(i).copy_(param.data)
                if param.grad is not None:
                    self.grad_view(i).copy_(param.grad)
                if not self.staged[i]:
                    param.data = self.value_view(i)
                    param.grad = self.grad_view(i)
            for k, buffer in enumerate(self.buffers):
                self._buffer_slice(self.values, k).copy_(buffer.reshape(-1))

    def _buffer_slice(self, flat, k):
        begin = self.buffer_begins[k]
        return flat[begin:begin + self.buffers[k].numel()]

    def stage_buffers(self):
        """Writes each buffer minus the cluster's copy into the gradient's
        buffer region: what this worker pushes for them."""
        with torch.no_grad():
            for k, buffer in enumerate(self.buffers):
                pushed = self._buffer_slice(self.grads, k)
                pushed.copy_(buffer.reshape(-1))  # in float32 on the host, whatever its own
                pushed.sub_(self._buffer_slice(self.values, k))

    def receive(self):
        """After the flat values changed (a step, joining): writes them into
        the staged parameters, rounded to their dtype, and copies the
        cluster's copy of the buffers (the workers' mean after a step, the
        first worker's after joining) into the buffers, in place."""
        with torch.no_grad():
            for i, param in enumerate(self.params):
                if self.staged[i]:
                    param.data.copy_(self.value_view(i))
            for k, buffer in enumerate(self.buffers):
                buffer.copy_(self._buffer_slice(self.values, k).view(buffer.shape))
        self._probed = self._probe()

    # --------------------------------------------- parameters changed locally
    # The cluster's copy is the parameters' only source of truth: a change
    # made to the parameters outside a step (model.load_state_dict, an
    # in-place re-initialisation, a projection after the step) is never sent
    # to the servers. changed_since_receive() detects one from a sample:
    # the bits of a few elements of every parameter (its first, middle and
    # last) and of about PROBE_SPREAD elements spread over the whole flat
    # vector, read at every receive() and compared before the next push.
    # That costs O(parameters + PROBE_SPREAD) element reads per step, not a
    # copy or a pass over the flat vector (which may be gigabytes); it sees
    # any change of a whole tensor (a loaded checkpoint, a re-initialisation,
    # a scaling) and may miss one confined to a few elements that no probe
    # reads.

    PROBE_SPREAD = 1024

    def _plan_probes(self):
        flat = set()
        per_device = {}  # staged parameters: device -> [(i, index)]
        for i, param in enumerate(self.params):
            n = param.numel()
            if n == 0:
                continue
            local = sorted({0, n // 2, n - 1})
            if not self.staged[i]:
                flat.update(self.begins[i] + k for k in local)
                continue
            if param.dim() == 0:
                index = ()
            else:
                index = tuple(torch.as_tensor(a, dtype=torch.long, device=param.device)
                              for a in np.unravel_index(local, tuple(param.shape)))
            per_device.setdefault(param.device, []).append((i, index))
        if self.param_elements > 0:
            stride = max(1, self.param_elements // self.PROBE_SPREAD)
            flat.update(k for k in range(0, self.param_elements, stride)
                        if not self.staged[bisect.bisect_right(self.begins, k) - 1])
        self._flat_probes = torch.tensor(sorted(flat), dtype=torch.long)
        self._staged_probes = per_device

    def _probe(self):
        """The probes' bits: the flat ones, then one int64 tensor per device
        of the staged parameters' (one comparison, one sync, per device)."""
        with torch.no_grad():
            flat = self.values.index_select(0, self._flat_probes).view(torch.int32)
            staged = {device: torch.cat([_bits(self.params[i].detach()[index])
                                         for i, index in probes])
                      for device, probes in self._staged_probes.items()}
        return flat, staged

    def remember_values(self):
        """Takes what the parameters hold now as what the cluster wrote: after
        a step that failed or was aborted, whose pulls may have written some
        shards' new values (the worker writes only the cluster's values)."""
        if self._probed is not None:
            self._probed = self._probe()

    def changed_since_receive(self):
        """The names of the parameters whose probed elements differ (bit for
        bit: NaN equals NaN) from what the last receive() left there; []
        before the first receive()."""
        if self._probed is None:
            return []
        flat_then, staged_then = self._probed
        flat_now, staged_now = self._probe()
        changed = set()
        if not torch.equal(flat_now, flat_then):
            for k in torch.nonzero(flat_now != flat_then).reshape(-1).tolist():
                position = int(self._flat_probes[k])
                changed.add(bisect.bisect_right(self.begins, position) - 1)
        for device, probes in self._staged_probes.items():
            if torch.equal(staged_now[device], staged_then[device]):
                continue
            offset = 0
            for i, index in probes:
                count = self.params[i].detach()[index].numel()
                if not torch.equal(staged_now[device][offset:offset + count],
                                   staged_then[device][offset:offset + count]):
                    changed.add(i)
                offset += count
        return [self.names[i] for i in sorted(changed)]

    def _is_view(self, tensor, flat, i):
        return (tensor is not None and tensor.device.type == "cpu"
                and tensor.dtype == torch.float32
                and tensor.data_ptr() == flat.data_ptr() + 4 * self.begins[i]
                and tensor.shape == self.params[i].shape and tensor.is_contiguous())

    def sync_grad(self, i):
        """Makes the flat gradient buffer hold parameter i's gradient and its
        .grad the view again: a replaced .grad is copied in, None is zero. A
        staged parameter's gradient is copied in and converted; its .grad
        stays its own."""
        param = self.params[i]
        grad = param.grad
        if not self.staged[i] and self._is_view(grad, self.grads, i):
            return
        view = self.grad_view(i)
        with torch.no_grad():
            if grad is None:
                view.zero_()
            else:
                if grad.layout != torch.strided:
                    grad = grad.to_dense()
                view.copy_(grad)
        if not self.staged[i]:
            param.grad = view

    def sync_all_grads(self):
        for i in range(len(self.params)):
            self.sync_grad(i)

    def zero_grads(self):
        """Zeroes the flat gradient buffer, every .grad a view of it (a
        staged parameter's own .grad is zeroed in place)."""
        self.grads.zero_()
        with torch.no_grad():
            for i, param in enumerate(self.params):
                if self.staged[i]:
                    if param.grad is not None:
                        param.grad.zero_()
                elif not self._is_view(param.grad, self.grads, i):
                    param.grad = self.grad_view(i)

    def restore_value_views(self):
        """Points every parameter's .data at its slice of the flat buffer again,
        should something have replaced it (warning once per parameter): the
        cluster's copy, not the replacement, is what the next step updates."""
        for i, param in enumerate(self.params):
            if self.staged[i] or self._is_view(param.data, self.values, i):
                continue
            if i not in self._warned_replaced:
                self._warned_replaced.add(i)
                warnings.warn(f"parameter {self.names[i]} no longer shares the optimizer's flat "
                              "storage (was param.data replaced?); it is pointed back at the "
                              "cluster's copy, and the replacement is ignored. Change "
                              "parameters in place (param.data.copy_) before building the "
                              "optimizer instead.", RuntimeWarning, stacklevel=3)
            param.data = self.value_view(i)
