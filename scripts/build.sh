#!/usr/bin/env bash
# Configures and builds into build/ (binaries in build/bin/).
# Environment: BUILD_DIR (build), BUILD_TYPE (Release), LOCO_CUDA (AUTO|ON|OFF),
# JOBS (number of cores), CMAKE_ARGS (extra configure arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
LOCO_CUDA=${LOCO_CUDA:-AUTO}
JOBS=${JOBS:-$(nproc)}
case "$LOCO_CUDA" in AUTO|ON|OFF) ;; *) echo "build.sh: LOCO_CUDA must be AUTO, ON or OFF (got '$LOCO_CUDA')" >&2; exit 2;; esac
GEN=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD_DIR/Makefile" ]; then GEN=(-G Ninja); fi
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DLOCO_CUDA="$LOCO_CUDA" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "build.sh: binaries in $BUILD_DIR/bin"
