#!/usr/bin/env bash
# The PyTorch example in one command: installs what is missing, builds
# (the programs and the Python package loco_ps), and runs
# examples/torch_fashion_mnist.py, which starts a local cluster
# (loco_ps.Cluster: a coordinator and 2 parameter servers) and 2 worker
# processes that train a small CNN on Fashion-MNIST with
# loco_ps.torch.DistributedOptimizer and 4-bit LoCo gradients for 2 epochs,
# then prints the test accuracy and the gradient bytes pushed. Extra
# arguments go to the example (later ones win), e.g.
#   scripts/torch-example.sh --codec fp32      # the uncompressed baseline
#   scripts/torch-example.sh --max-steps 20    # a quick check
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
[ -f "$BUILD_DIR/python/loco_ps/__init__.py" ] || {
  echo "torch-example: $BUILD_DIR/python/loco_ps was not built (see the configure" \
       "output above: pybind11-dev, python3-dev or python3-numpy missing?)" >&2
  exit 1
}
# Debian's interpreter by name: the package is built for it, and a python3
# earlier on PATH may lack Debian's torch and numpy.
PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" LOCO_BIN_DIR="$BUILD_DIR/bin" \
  exec /usr/bin/python3 examples/torch_fashion_mnist.py --workers 2 --epochs 2 \
  --codec loco --bits 4 "$@"
