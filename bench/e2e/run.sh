#!/usr/bin/env bash
# End-to-end benchmark on shaped network links: LoCo-4 against our fp32
# parameter server and PyTorch DDP (gloo), each worker in its own network
# namespace behind a tbf-shaped veth link (bench/README.md, "End to end on
# shaped links").
#
#   bench/e2e/run.sh --quick     [--build-dir DIR]   # <= 60 s smoke test (ctest e2e_quick)
#   bench/e2e/run.sh --full      [--build-dir DIR] [--results DIR] [--openblas-core C]
#                                [--pair-repeats K]  # the headline pair K more times
#   bench/e2e/run.sh --transport [--build-dir DIR] [--results DIR] [--openblas-core C]
#                    [--transport-workers W,W] [--transport-servers S,S]
#                    [--transport-rates R,R] [--transport-pushes K] [--transport-elements N,N]
#   bench/e2e/run.sh --tcp-cost  [--tcp-mib N] [--results DIR]  # CPU per MB of a link
#   bench/e2e/run.sh --compare NAME --against-build-dir B [--build-dir A] [--rate MBIT]
#                    [--batch N] [--workers W] [--compare-steps N] [--repeat K]
#                    [--large-hidden H,H] [--results DIR]   # a change, A against B
#   bench/e2e/run.sh --torch [--build-dir DIR] [--results DIR] [--torch-hidden H,H]
#                    [--torch-steps N] [--torch-warmup N] [--torch-repeat K]
#                    # torch DDP fp32 vs torch through LoCo-PS LoCo-4 vs loco-worker
#   bench/e2e/run.sh --torch-quick [--build-dir DIR]  # its smoke test (ctest e2e_torch_quick)
#   bench/e2e/run.sh --torch-overhead [--torch-overhead-workers W,W] [--torch-overhead-repeat K]
#                    [--torch-hidden H,H] [--torch-steps N] [--results DIR]
#                    # the torch peer vs loco-worker at W=1, S=1: no CPU contention
#   bench/e2e/run.sh --cleanup [--prefix leN]         # remove leftovers; without --prefix,
#                                                     # of EVERY run, running ones included
#
# Needs root (namespaces, tc), iproute2, curl, GNU time; the DDP rows need
# Debian's python3-torch (scripts/install-deps.sh --bench), the --torch rows
# also the loco_ps package built in --build-dir. A measured run
# gives every process the fastest OpenBLAS kernels that pass a product probe
# (python3-numpy; --openblas-core auto); --quick keeps the environment's.
# Namespaces are named le<pid>-srv / le<pid>-w<i>; they are removed on exit,
# even on failure.
# Exit 77 (skip) when not root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case "${1:-}" in -h|--help) sed -n '2,34p' "$0"; exit 0 ;; esac
if [ "$(id -u)" -ne 0 ]; then
  echo "e2e: SKIPPED: needs root to create network namespaces and shape links (ip netns, tc)"
  exit 77
fi
for a in "$@"; do
  if [ "$a" = "--cleanup" ]; then exec /usr/bin/python3 "$here/e2e.py" "$@"; fi
done
prefix="le$(( $$ % 10000000 ))"
# The Python driver cleans up too; this catches a driver that was killed.
trap '/usr/bin/python3 "$here/e2e.py" --cleanup --prefix "$prefix" >/dev/null 2>&1 || true' EXIT
/usr/bin/python3 "$here/e2e.py" --prefix "$prefix" "$@"
