#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
# Tests start real servers on loopback; run them two at a time on small machines.
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 -j "${TEST_JOBS:-2}" "$@"
