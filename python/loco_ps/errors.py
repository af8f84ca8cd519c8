"""Exceptions raised when the cluster refuses a call or cannot be reached.

Every call of :class:`loco_ps.Worker` that talks to the cluster either
succeeds or raises a :class:`ClusterError`. The subclass says what kind of
failure it was, so that a training script can react to it::

    try:
        worker.step(grads, params)
    except loco_ps.FailedPreconditionError:
        ...  # e.g. the worker expired: call worker.rejoin(params)
    except loco_ps.UnavailableError:
        ...  # the cluster could not be reached within the retries

The exception carries the server's own message (``str(e)`` and
``e.message``) and the status code's name (``e.code``, for instance
``"FAILED_PRECONDITION"``).

Mistakes in the arguments themselves (an array of the wrong dtype, size or
layout, an unknown keyword) are not cluster errors: they raise the usual
``TypeError`` or ``ValueError`` before anything is sent.
"""

__all__ = [
    "ClusterError",
    "InvalidArgumentError",
    "FailedPreconditionError",
    "UnavailableError",
    "DeadlineExceededError",
    "PermissionDeniedError",
    "NotFoundError",
    "AlreadyExistsError",
    "ResourceExhaustedError",
    "AbortedError",
    "from_status",
]


class ClusterError(RuntimeError):
    """A call to the cluster failed.

    Attributes:
        code: the status code's name, e.g. ``"UNAVAILABLE"``.
        message: what the client library or the server said.
    """

    def __init__(self, message, code="UNKNOWN"):
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self):
        return f"{self.code}: {self.message}"

    def __reduce__(self):
        # Keeps the code through pickling (e.g. across multiprocessing).
        return (type(self), (self.message, self.code))


class InvalidArgumentError(ClusterError):
    """The cluster refused a value: a bad option, a model size that differs
    from the one the cluster was started with, non-finite parameters."""


class FailedPreconditionError(ClusterError):
    """The call does not fit the worker's or the cluster's state: not joined
    yet, already joined, expired (call ``rejoin``), already left."""


class UnavailableError(ClusterError):
    """The coordinator or a server could not be reached, even after the
    retries (wrong address, process down, network)."""


class DeadlineExceededError(ClusterError):
    """A bounded wait ran out: joining (``join_timeout_ms``), a step
    (``step_timeout_ms``), one RPC (``rpc_timeout_ms``)."""


class PermissionDeniedError(ClusterError):
    """The cluster refused the credentials: a wrong or missing bearer token,
    or a client certificate it does not accept. Also raised for the
    UNAUTHENTICATED code, which is also what this process's own TLS
    handshake gives when it refuses the cluster: a certificate that
    ``tls_ca`` does not trust or that does not name the host dialled
    (``tls_server_name``), or a cluster without TLS (``insecure=True``
    there); and at once, where the cluster closes the connection, for a
    plaintext worker at a TLS cluster, a worker without ``tls_cert`` at one
    that requires client certificates, and a ``tls_cert`` that it refuses
    (a probe of the cluster's TLS tells these from a restart). The message
    says which."""


class NotFoundError(ClusterError):
    """The cluster does not know this worker (any more)."""


class AlreadyExistsError(ClusterError):
    """The thing to create exists already."""


class ResourceExhaustedError(ClusterError):
    """A limit was hit: a message larger than allowed, too many calls."""


class AbortedError(ClusterError):
    """The call was abandoned, e.g. a step whose gradient computation
    failed."""


_BY_CODE = {
    "INVALID_ARGUMENT": InvalidArgumentError,
    "FAILED_PRECONDITION": FailedPreconditionError,
    "UNAVAILABLE": UnavailableError,
    "DEADLINE_EXCEEDED": DeadlineExceededError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "UNAUTHENTICATED": PermissionDeniedError,
    "NOT_FOUND": NotFoundError,
    "ALREADY_EXISTS": AlreadyExistsError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError,
    "ABORTED": AbortedError,
}


def from_status(code, message):
    """The exception for a status code name and message.

    Codes without a class of their own (OUT_OF_RANGE, UNIMPLEMENTED,
    DATA_LOSS, INTERNAL, ...) give a plain :class:`ClusterError`. The
    extension module calls this to turn a failed C++ status into an
    exception.
    """
    return _BY_CODE.get(code, ClusterError)(message, code)
