"""How DistributedOptimizer reaches the cluster when it is not told: from
the same LOCO_* environment variables as loco-worker reads (README's
configuration table), which `python3 -m loco_ps.run` sets for the trainers
it starts and the Kubernetes worker pods carry (deploy/k8s).

Only with coordinator=None: a coordinator given as an argument reads
nothing from the environment, so that a process never mixes a cluster
named in its code with settings meant for another.
"""

import os

# (argument, variable, kind) in the order a message lists them.
VARIABLES = (
    ("coordinator", "LOCO_COORDINATOR", "address"),
    ("insecure", "LOCO_INSECURE", "bool"),
    ("tls_ca", "LOCO_TLS_CA", "path"),
    ("auth_token_file", "LOCO_AUTH_TOKEN_FILE", "path"),
    ("name", "LOCO_NAME", "text"),
    ("wait_for_workers", "LOCO_WAIT_FOR_WORKERS", "count"),
    ("tls_cert", "LOCO_TLS_CERT", "path"),
    ("tls_key", "LOCO_TLS_KEY", "path"),
    ("tls_server_name", "LOCO_TLS_SERVER_NAME", "text"),
    ("metrics_port", "LOCO_METRICS_PORT", "metrics_port"),
    ("metrics_host", "LOCO_METRICS_HOST", "text"),
)
_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


def variable_value(argument, variable, kind, text):
    """`text` of $variable as `argument` takes it; ValueError naming both
    when it is not one."""
    if kind == "bool":
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"${variable}={text!r} (for {argument}): expected true or false "
                         "(or 1/0, yes/no)")
    if kind == "metrics_port":
        # loco-worker's meaning: 0 off, -1 any free port; metrics_port's:
        # None off, 0 any free port.
        try:
            port = int(text, 10)
        except ValueError:
            port = None
        if port is None or not -1 <= port <= 65535:
            raise ValueError(f"${variable}={text!r} (for {argument}): expected a port in "
                             "[1, 65535], 0 for none or -1 for any free port")
        return None if port == 0 else max(port, 0)
    if kind == "count":
        if not text.isdigit():
            raise ValueError(f"${variable}={text!r} (for {argument}): expected an integer "
                             ">= 0 (0: do not wait)")
        return max(1, int(text))  # loco-worker's 0 ("start at once") is a wait for one
    return text


def setting_from_environment(argument, environ=None):
    """What `argument`'s variable says, read as connection_from_environment
    reads it; None when the variable is unset or empty. ValueError naming
    both when its value is not one."""
    environ = os.environ if environ is None else environ
    for name, variable, kind in VARIABLES:
        if name == argument:
            text = environ.get(variable, "")
            return None if text == "" else variable_value(argument, variable, kind, text)
    raise KeyError(argument)


def connection_from_environment(given, environ=None):
    """The settings of `given` (argument -> value, None when not given)
    with each one not given taken from its variable when that is set and
    not empty (as loco-worker: an empty variable counts as unset).
    TypeError when no coordinator is given either way, saying how to give
    one; ValueError for a variable whose value is not one."""
    environ = os.environ if environ is None else environ
    settings = dict(given)
    for argument, _, _ in VARIABLES:
        if settings.get(argument) is None:
            settings[argument] = setting_from_environment(argument, environ)
    if settings.get("coordinator") is None:
        raise TypeError("coordinator=None and $LOCO_COORDINATOR is not set: give the "
                        "coordinator's \"host:port\", or run under `python3 -m loco_ps.run`, "
                        "which starts a local cluster and sets it")
    return settings
