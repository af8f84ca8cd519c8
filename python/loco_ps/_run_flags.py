"""The flags of `python3 -m loco_ps.run`, each with its environment variable
and its default, in one table from which the parser, its help and the
README's configuration table (--print-config-markdown) are made.

A flag typed on the command line wins over its variable; an empty variable
counts as unset, as for the C++ binaries. A value from either is checked by
the same rule, and a refusal names where it came from.
"""

import collections
import socket

from loco_ps._environment import variable_value

# kind: "count" (an integer >= 1), "bool" (typed: present; in the
# environment: true/false as the workers read it), "address" (host:port), "name"
# (no spaces), "path", or a tuple of choices. mode: which run takes it,
# "local" (a cluster of its own), "joining" (--coordinator) or "both".
Flag = collections.namedtuple("Flag", "flag variable default kind mode help")

FLAGS = (
    Flag("--workers", "LOCO_WORKERS", 2, "count", "both", "worker processes of the script"),
    Flag("--servers", "LOCO_SERVERS", 1, "count", "local",
         "parameter servers of the local cluster, one shard each"),
    Flag("--pull-codec", "LOCO_PULL_CODEC", None, ("fp32", "bf16", "delta"), "local",
         "how the local cluster's servers send parameters back (empty = the servers' "
         "default, delta)"),
    Flag("--log-dir", "LOCO_LOG_DIR", None, "path", "local",
         "keep the local cluster's coordinator and server logs here (empty = a temporary "
         "folder, removed at the end)"),
    Flag("--metrics", "LOCO_METRICS", False, "bool", "both",
         "the workers serve Prometheus /metrics on free ports "
         "(DistributedOptimizer.metrics_address says where); so do the local cluster's "
         "coordinator and servers, printed at the start"),
    Flag("--coordinator", "LOCO_COORDINATOR", None, "address", "joining",
         "join the cluster of this coordinator (host:port) instead of starting one; the "
         "caller's LOCO_INSECURE, LOCO_TLS_* and LOCO_AUTH_TOKEN_FILE reach the workers"),
    Flag("--wait-for-workers", "LOCO_WAIT_FOR_WORKERS", None, "count", "joining",
         "with --coordinator: the workers step 0 waits for, in the whole cluster "
         "(empty = --workers)"),
    Flag("--name-prefix", "LOCO_NAME_PREFIX", None, "name", "joining",
         "with --coordinator: the workers are named <prefix>-worker-<i> (empty = this "
         "machine's host name)"),
)


def attribute(flag):
    """The argparse attribute of `flag` ("--pull-codec": "pull_codec")."""
    return flag.flag[2:].replace("-", "_")


def _checked(flag, text):
    """`text` as `flag` takes it; ValueError saying what is wrong and what
    would be right (without where the text came from)."""
    if flag.kind == "count":
        if not text.strip().isdigit():
            raise ValueError("expected an integer >= 1")
        if int(text) < 1:
            raise ValueError("need at least 1 server" if flag.flag == "--servers" else
                             "need at least 1 worker")
        return int(text)
    if flag.kind == "address":
        host, colon, port = text.rpartition(":")
        if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("give the coordinator's host:port, the port in 1..65535 "
                             "(e.g. 10.0.0.1:7000)")
        return text
    if flag.kind == "name":
        if not text.strip() or any(c.isspace() for c in text):
            raise ValueError("give a name without spaces")
        return text
    if isinstance(flag.kind, tuple) and text not in flag.kind:
        raise ValueError(f"expected one of {', '.join(flag.kind)}")
    return text


def resolve(parser, args, environ, flags):
    """Sets each of `flags` in `args` from what was typed, else from its
    variable, else its default; refuses a bad value through parser.error,
    naming the flag or the variable."""
    for flag in flags:
        name = attribute(flag)
        typed = getattr(args, name)
        if flag.kind == "bool" and typed:
            continue  # store_true: typed
        if typed not in (None, False):
            try:
                setattr(args, name, _checked(flag, str(typed)))
            except ValueError as refused:
                parser.error(f"{flag.flag} {typed!r}: {refused}" if flag.kind in ("address",
                                                                                   "name")
                             else f"{flag.flag} {typed}: {refused}")
            continue
        text = environ.get(flag.variable, "")
        if text == "":
            setattr(args, name, flag.default)
            continue
        try:
            if flag.kind == "bool" or flag.variable == "LOCO_WAIT_FOR_WORKERS":
                # As the workers read these variables (loco_ps._environment):
                # the same spellings of true and false, and 0 a wait for one.
                kind = "bool" if flag.kind == "bool" else "count"
                value = variable_value(flag.flag, flag.variable, kind, text)
            else:
                value = _checked(flag, text)
        except ValueError as refused:
            message = str(refused)
            if not message.startswith("$"):
                message = f"${flag.variable}={text!r} (for {flag.flag}): {message}"
            parser.error(f"{message} (or give {flag.flag})")
        setattr(args, name, value)


def refuse_or_note_other_mode(parser, args, environ, joining, note):
    """The flags of the other kind of run: refused when typed; a variable
    of one is ignored, and `note` says so."""
    for flag in FLAGS:
        if flag.mode != ("local" if joining else "joining") or flag.flag == "--coordinator":
            continue
        if getattr(args, attribute(flag)) is not None:
            if joining:
                parser.error(f"{flag.flag} is for the local cluster; with --coordinator the "
                             f"cluster is already running")
            parser.error(f"{flag.flag} is for joining a running cluster (--coordinator); the "
                         f"local cluster's step 0 waits for its --workers, named worker-<i>")
        if environ.get(flag.variable, ""):
            note(f"${flag.variable} ignored: " + (
                "it is for a local cluster, and this run joins a running one" if joining else
                "it is for joining a running cluster (--coordinator), and this run starts "
                "its own"))


def default_name_prefix():
    return socket.gethostname() or "worker"


def markdown_rows():
    """The README configuration table's rows of `python3 -m loco_ps.run`, in
    the form scripts/config-table.sh prints for the C++ binaries."""
    rows = []
    for flag in FLAGS:
        if flag.default is None:
            default = "(empty)"
        elif flag.kind == "bool":
            default = "`true`" if flag.default else "`false`"
        else:
            default = f"`{flag.default}`"
        help_text = flag.help
        if isinstance(flag.kind, tuple):
            help_text += f" ({'|'.join(flag.kind)})"
        rows.append(f"| `python3 -m loco_ps.run` | `{flag.flag}` | `{flag.variable}` | {default} | "
                    + help_text.replace("|", "\\|") + " |")
    return rows
