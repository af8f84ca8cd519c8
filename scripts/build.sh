#!/usr/bin/env bash
# Configures and builds into build/ (binaries in build/bin/; the Python package
# loco_ps in build/python/ when pybind11 and /usr/bin/python3 with numpy are
# found).
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
if [ -d "$BUILD_DIR/python/loco_ps" ]; then
  echo "build.sh: Python package in $BUILD_DIR/python (PYTHONPATH=$BUILD_DIR/python /usr/bin/python3)"
fi
