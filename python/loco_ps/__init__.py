"""LoCo-PS for Python: train with a LoCo-PS parameter-server cluster.

A :class:`Worker` joins a cluster through its coordinator and runs
synchronous data-parallel steps: each step pushes your gradient, compressed
(4-bit LoCo by default), to the parameter servers, which apply AdamW to the
mean of every worker's gradient, and writes the updated parameters back
into your numpy array in place::

    import numpy as np
    import loco_ps

    worker = loco_ps.Worker("10.0.0.1:7000", codec="loco", tls_ca="ca.pem")
    params = np.ascontiguousarray(initial_params, dtype=np.float32)  # 1-D
    worker.join(params.size)
    worker.init_parameters(params)      # the cluster's copy, in place
    while worker.version < total_steps:
        grads = compute_gradient(params)
        worker.step(grads, params)      # params now hold the next version
    worker.close()

:class:`Cluster` starts a whole cluster on this machine for experiments and
tests. ``loco_ps.torch`` (imported separately) puts PyTorch models on top.

Errors from the cluster raise :class:`ClusterError` subclasses
(:mod:`loco_ps.errors`). The C++ library's log lines go to
``logging.getLogger("loco_ps")`` (:func:`set_native_log`).
"""

# First: it registers its exit handler before _core registers its own, so
# that the lines logged while the workers close at exit still reach logging.
from loco_ps._native_log import set_native_log
from loco_ps._core import ADVANCED_OPTIONS, Worker
from loco_ps.cluster import Cluster, ClusterStartError
from loco_ps.errors import (
    AbortedError,
    AlreadyExistsError,
    ClusterError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnavailableError,
)

__all__ = [
    "ADVANCED_OPTIONS",
    "AbortedError",
    "AlreadyExistsError",
    "Cluster",
    "ClusterError",
    "ClusterStartError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnavailableError",
    "Worker",
    "set_native_log",
]
