#!/usr/bin/env bash
# Builds the servers and their tests (server_test, cluster_test, hostile_test)
# and the numeric kernels' tests (kernels_test: vector paths with masked
# loads and stores on partial blocks, and stack buffers per block;
# small_batch_gemm_test: the worker's products, the same at the edges
# of their tiles) with
# -fsanitize=address,undefined into build-asan and runs them with every
# sanitizer report fatal. Only these tests, to keep CI short; the fuzzers
# (scripts/fuzz.sh) cover the validation paths with the same sanitizers.
# Then the Python package's tests (python_*, when the package is built):
# the instrumented extension loaded into Debian's interpreter with the
# ASan runtime preloaded, driving instrumented servers.
#
# Environment: ASAN_BUILD_DIR (build-asan), JOBS (2), SANITIZE_TIMEOUT_S (1200
# per test binary).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
TESTS=(server_test cluster_test hostile_test kernels_test small_batch_gemm_test)
GEN=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD_DIR/Makefile" ]; then GEN=(-G Ninja); fi
# -O1 -g1: the optimisation level ASan is made for, and line tables only,
# which is all a report's stack trace needs (file:line per frame). The
# compile is about twice as fast as RelWithDebInfo's -O2 -g (24 s against
# 11 s for return_path_test.cc here), and this tree is CI's longest build.
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DLOCO_CUDA=OFF -DLOCO_SANITIZE=address,undefined -DLOCO_BUILD_BENCH=OFF >/dev/null
PYTHON_TESTS=()
if ctest --test-dir "$BUILD_DIR" -N -R '^python_' | grep -q 'Total Tests: [1-9]'; then
  PYTHON_TESTS=(python_tests)
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target "${TESTS[@]}" "${PYTHON_TESTS[@]}"

# Any report is fatal: ASan halts on the first error (abort, so the exit is
# non-zero even where a handler would swallow it), UBSan does not recover
# (-fno-sanitize-recover=all at build time; halt_on_error here as well).
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in "${TESTS[@]}"; do
  echo "sanitize.sh: $t"
  start=$(date +%s)
  timeout "${SANITIZE_TIMEOUT_S:-1200}" "$BUILD_DIR/bin/$t" --gtest_brief=1
  echo "sanitize.sh: $t clean ($(( $(date +%s) - start ))s)"
done
if [ ${#PYTHON_TESTS[@]} -gt 0 ]; then
  # Leak checking off here: CPython and torch keep allocations until exit
  # on purpose; the C++ tests above check leaks. Every other report stays
  # fatal, in the extension and in the servers the tests start.
  # Reports go to files: pytest captures the tests' stderr, and a server
  # the tests start and then kill could report without failing a test.
  # Any file there fails the run.
  reports="$BUILD_DIR/sanitizer-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  echo "sanitize.sh: python_* (loco_ps)"
  start=$(date +%s)
  status=0
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0:log_path=$reports/asan" \
  UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$reports/ubsan" \
    ctest --test-dir "$BUILD_DIR" -R '^python_' --output-on-failure \
      --timeout "${SANITIZE_TIMEOUT_S:-1200}" || status=$?
  if [ -n "$(ls -A "$reports")" ]; then
    for f in "$reports"/*; do echo "sanitize.sh: report $f:"; cat "$f"; done
    status=1
  fi
  if [ "$status" -ne 0 ]; then
    echo "sanitize.sh: python_* failed under the sanitizers" >&2
    exit 1
  fi
  echo "sanitize.sh: python_* clean ($(( $(date +%s) - start ))s)"
else
  echo "sanitize.sh: python_* skipped (the Python package is not built here)"
fi
echo "sanitize.sh: all clean"
