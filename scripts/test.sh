#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/check-layers.sh  # which folder may include which (docs/DESIGN.md §4)
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
# Tests start real servers on loopback; run them two at a time on small machines.
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j "${TEST_JOBS:-2}" "$@"
# Sanitizer and fuzzing jobs (CI runs both; a developer may skip them with
# LOCO_SKIP_SANITIZE=1 / LOCO_SKIP_FUZZ=1). LOCO_FUZZ_SECONDS: per target.
if [ "${LOCO_SKIP_SANITIZE:-0}" != 1 ]; then bash scripts/sanitize.sh; fi
if [ "${LOCO_SKIP_FUZZ:-0}" != 1 ]; then bash scripts/fuzz.sh --seconds "${LOCO_FUZZ_SECONDS:-30}"; fi
# Deployment: offline checks of the manifests, compose file and Dockerfile,
# then the image really built with podman and smoke-run (long the first
# time: the base is debootstrapped and the project compiled in the image;
# later runs reuse the cached base, layers and ccache. LOCO_SKIP_IMAGE=1
# skips the image on a laptop).
bash scripts/check-deploy.sh
if [ "${LOCO_SKIP_IMAGE:-0}" != 1 ]; then bash scripts/image.sh; fi
