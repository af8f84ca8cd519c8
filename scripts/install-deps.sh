#!/usr/bin/env bash
# Installs every Debian package that the build, the tests, the demo and the
# benchmarks need. Idempotent: when everything is present it does nothing
# (no apt-get update, no network). Runs as root, or through sudo when present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  # transport and contract
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  # worker tickets (security/worker_ticket.h): HMAC-SHA256 from libcrypto
  libssl-dev
  # event loop, metrics
  libboost-dev libboost-system-dev prometheus-cpp-dev libcurl4-openssl-dev zlib1g-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # numerics and data
  libopenblas-dev dataset-fashion-mnist fortunes
  # tools used by tests and scripts
  openssl curl python3 procps iproute2
  # convergence benchmark plot
  gnuplot-nox
  # promtool for the deploy/prometheus checks (tests/metrics)
  prometheus
  # libFuzzer targets (scripts/fuzz.sh): clang and its fuzzer/sanitizer runtimes
  clang-14 libclang-rt-14-dev
  # end-to-end benchmark (bench/e2e): peak RSS and CPU time of each process
  time
  # the Python package loco_ps (python/): Debian's interpreter headers, numpy
  # and pybind11 (never pip)
  python3-dev python3-numpy pybind11-dev
)
# The Python tests (tests/python, pytest) and loco_ps.torch: PyTorch 1.13
# (CPU), about 1 GB with its dependencies. LOCO_DEPS=build (the image's
# build stage, which builds neither tests nor anything that needs torch)
# leaves them out.
if [ "${LOCO_DEPS:-all}" != build ]; then
  PACKAGES+=(python3-torch python3-pytest)
fi
# --bench: also what only the benchmarks use: the threaded OpenBLAS of the
# end-to-end benchmark's PyTorch DDP peer (bench/e2e) and perf.
BENCH_PACKAGES=(libopenblas0-pthread linux-perf)
if [ "${1:-}" = "--bench" ]; then PACKAGES+=("${BENCH_PACKAGES[@]}"); fi
# The deployment checks (scripts/image.sh, scripts/check-deploy.sh): podman
# builds and runs the image with runc, debootstrap makes its Debian base
# (no image registry is reachable), the rest is podman's storage and network
# plumbing. LOCO_DEPS=build (the image's build stage) leaves them out.
if [ "${LOCO_DEPS:-all}" != build ]; then
  PACKAGES+=(podman runc debootstrap fuse-overlayfs uidmap slirp4netns
             containernetworking-plugins iptables)
fi
# Tools wanted as commands, from Debian only when no other install provides
# the command: Debian's kubernetes-client (kubectl 1.20, kustomize v2) yields
# to a newer kubectl installed otherwise (same path, so dpkg would refuse
# both), and Debian's npm to a Node.js that ships its own npm.
declare -A COMMANDS=()
if [ "${LOCO_DEPS:-all}" != build ]; then
  COMMANDS=([kubectl]=kubernetes-client [node]=nodejs [npm]=npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
for c in "${!COMMANDS[@]}"; do
  command -v "$c" >/dev/null 2>&1 || missing+=("${COMMANDS[$c]}")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
