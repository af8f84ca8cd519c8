"""The command line of the end-to-end benchmark (e2e.py): build() makes the
parser (one mode of a mutually exclusive group, the options each mode
reads, and torch_bench's and torch_overhead's own), check() refuses bad
values with what would be right (argparse's exit 2) and turns the
comma-separated lists into lists of integers, and parse() does both.
Nothing here needs root or starts a process.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas  # noqa: E402
import torch_bench  # noqa: E402
import torch_overhead  # noqa: E402
from configs import BATCH, WORKERS, named_configs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def add_modes(ap):
    """The modes, exactly one of which a run names."""
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--transport", action="store_true")
    mode.add_argument("--cleanup", action="store_true")
    mode.add_argument("--torch", action="store_true",
                      help="torch DDP against torch through LoCo-PS (bench/e2e/torch_bench.py)")
    mode.add_argument("--torch-quick", action="store_true", help="--torch's smoke test")
    mode.add_argument("--torch-overhead", action="store_true",
                      help="the Python layer against loco-worker at W=1, S=1 "
                           "(bench/e2e/torch_overhead.py)")
    mode.add_argument("--tcp-cost", action="store_true",
                      help="only the CPU cost per MB of the links (bench/e2e/tcp_cost.py)")
    mode.add_argument("--compare", metavar="NAME", default="",
                      help="one configuration, two builds alternated: "
                           + ", ".join(named_configs()))


def build():
    """The parser of every mode's options."""
    ap = argparse.ArgumentParser(description="LoCo-PS end-to-end benchmark on shaped links")
    add_modes(ap)
    ap.add_argument("--prefix", default="", help="namespace prefix 'le<digits>' (run.sh sets it)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--demo-steps", type=int, default=150)
    ap.add_argument("--large-steps", type=int, default=20)
    ap.add_argument("--pair-repeats", type=int, default=2,
                    help="--full: runs of the headline pair (fp32 PS, LoCo-4 4-bit delta, "
                         "batch 64) after the matrix's, in [0, 10]")
    ap.add_argument("--demo-hidden", default="1024,1024",
                    help="hidden sizes of the demo model (a smaller one for a dry run)")
    ap.add_argument("--large-hidden", default="3072,3072",
                    help="hidden sizes of the large model (>= 10M parameters for the targets)")
    ap.add_argument("--transport-elements", default=f"{1 << 20},{4 << 20},{12 << 20}",
                    help="payload sizes of the transport probe, elements, comma separated")
    ap.add_argument("--transport-workers", default="1,4",
                    help="--transport and --full: worker links pushing at once (one probe "
                         "each), comma separated, each in [1, 16]")
    ap.add_argument("--transport-servers", default="1",
                    help="--transport and --full: parameter servers (shards), comma separated, "
                         "each in [1, 8]; with more than one every probe pushes every shard at "
                         "once")
    ap.add_argument("--transport-pushes", type=int, default=30,
                    help="--transport and --full: timed pushes (rounds) of each probe, in "
                         "[5, 10000]")
    ap.add_argument("--transport-rates", default="1000,10000",
                    help="--transport: link rates in Mbit/s, comma separated, each in "
                         "[10, 100000]")
    ap.add_argument("--tcp-mib", type=int, default=400,
                    help="--tcp-cost: MiB per stream, in [1, 100000]")
    ap.add_argument("--against-build-dir", default="",
                    help="--compare: the build B that --build-dir (A) is compared against")
    ap.add_argument("--rate", type=int, default=1000, help="--compare: link rate, Mbit/s")
    ap.add_argument("--batch", type=int, default=BATCH, help="--compare: global batch")
    ap.add_argument("--workers", type=int, default=WORKERS, help="--compare: workers")
    ap.add_argument("--compare-steps", type=int, default=40,
                    help="--compare: steps of each run (the first 2 are not timed)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="--compare: runs of each build (alternated A B, B A, ...)")
    ap.add_argument("--openblas-core", default="",
                    help="the OpenBLAS kernels of every process of a measured run, ours and "
                         "the peer's (bench/e2e/blas.py): auto (the fastest of the environment's, "
                         "OpenBLAS's own choice and the AVX2/AVX-512 cores the CPU runs; the "
                         "default of --full and --transport), inherit (the environment's "
                         "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE; always so for --quick) or "
                         "a core name such as SkylakeX; auto and a name must pass a product "
                         "probe first")
    torch_bench.add_arguments(ap)
    torch_overhead.add_arguments(ap)
    return ap


def check_compare(ap, a):
    """--compare's flags; --against-build-dir only with it."""
    if a.compare:
        if a.compare not in named_configs():
            ap.error(f"--compare takes a configuration of the measured run, one of "
                     f"{', '.join(named_configs())}; got '{a.compare}'")
        if not a.against_build_dir:
            ap.error("--compare needs --against-build-dir DIR: the build B to compare "
                     "--build-dir (A) against (it may be the same directory)")
        if not 1 <= a.rate <= 100000:
            ap.error(f"--rate must be in [1, 100000] Mbit/s, got {a.rate}")
        if not 1 <= a.workers <= 16 or a.batch < a.workers:
            ap.error(f"--workers must be in [1, 16] and --batch >= --workers, got "
                     f"--workers {a.workers} --batch {a.batch}")
        if not 5 <= a.compare_steps <= 10000 or not 1 <= a.repeat <= 20:
            ap.error(f"--compare-steps must be in [5, 10000] (medians need steps) and --repeat "
                     f"in [1, 20], got {a.compare_steps} and {a.repeat}")
    elif a.against_build_dir:
        ap.error("--against-build-dir is for --compare")


def check_sizes(ap, a):
    """The models' hidden sizes, the transport probe's payloads, pushes and
    lists of workers, servers and rates; the lists become lists of ints."""
    try:
        a.demo_hidden = [int(x) for x in a.demo_hidden.split(",")]
        a.large_hidden = [int(x) for x in a.large_hidden.split(",")]
        a.transport_elements = [int(x) for x in a.transport_elements.split(",")]
    except ValueError:
        ap.error("--demo-hidden, --large-hidden and --transport-elements take comma-separated "
                 "positive integers, e.g. 1024,1024")
    if min(a.demo_hidden + a.large_hidden) < 1 or min(a.transport_elements) < 4096:
        ap.error("hidden sizes must be >= 1 and transport payloads >= 4096 elements")
    if not 5 <= a.transport_pushes <= 10000:
        ap.error(f"--transport-pushes must be in [5, 10000], got {a.transport_pushes}")
    for name, lo, hi in (("transport_workers", 1, 16), ("transport_servers", 1, 8),
                         ("transport_rates", 10, 100000)):
        flag = "--" + name.replace("_", "-")
        try:
            values = [int(x) for x in getattr(a, name).split(",")]
        except ValueError:
            ap.error(f"{flag} takes comma-separated integers, got '{getattr(a, name)}'")
        if not all(lo <= v <= hi for v in values):
            ap.error(f"{flag} values must be in [{lo}, {hi}], got '{getattr(a, name)}'")
        setattr(a, name, values)


def check(ap, a):
    """Every refusal, in the order a run meets them (ap.error: exit 2)."""
    if a.openblas_core and a.openblas_core not in ("auto", "inherit") + blas.X86_CORES:
        ap.error(f"--openblas-core must be auto, inherit or one of OpenBLAS's x86 cores "
                 f"({', '.join(blas.X86_CORES)}), got '{a.openblas_core}'")
    if (a.quick or a.torch_quick) and a.openblas_core not in ("", "inherit"):
        ap.error("--quick and --torch-quick are tests and keep the environment's OpenBLAS "
                 "settings: drop --openblas-core, or use --full, --transport or --torch")
    if a.tcp_cost and not 1 <= a.tcp_mib <= 100000:
        ap.error(f"--tcp-mib must be in [1, 100000], got {a.tcp_mib}")
    check_compare(ap, a)
    torch_bench.check_arguments(ap, a)
    torch_overhead.check_arguments(ap, a)
    if a.prefix and not re.fullmatch(r"le\d{1,7}", a.prefix):
        ap.error(f"--prefix must look like le<digits> (at most 7 digits), got '{a.prefix}'")
    if not 0 <= a.pair_repeats <= 10:
        ap.error(f"--pair-repeats must be in [0, 10] (0: only the matrix's pair), "
                 f"got {a.pair_repeats}")
    if a.demo_steps < 30 or a.large_steps < 5:
        ap.error("--demo-steps must be >= 30 and --large-steps >= 5 (medians need steps)")
    check_sizes(ap, a)


def parse(argv=None):
    """The checked arguments of argv (sys.argv[1:] when None)."""
    ap = build()
    a = ap.parse_args(argv)
    check(ap, a)
    return a
