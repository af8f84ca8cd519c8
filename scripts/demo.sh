#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, and runs a
# local cluster (coordinator, 2 parameter servers, 4 workers as separate
# processes on loopback) that trains a 784-1024-1024-10 MLP on Fashion-MNIST
# with 4-bit LoCo gradients for 2 epochs, then prints the test accuracy and
# the traffic saved against fp32. Extra arguments go to loco-launch, e.g.
#   scripts/demo.sh --codec fp32        # the uncompressed baseline
#   scripts/demo.sh --epochs 1 --workers 2
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
SUMMARY=${SUMMARY:-$BUILD_DIR/demo-summary.json}
"$BUILD_DIR/bin/loco-launch" --servers 2 --workers 4 --epochs 2 --codec loco --bits 4 \
  --global-batch 256 --lr 1e-3 --summary-json "$SUMMARY" "$@"
echo "demo: summary written to $SUMMARY"
