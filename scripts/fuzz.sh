#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang into build-fuzz and runs
# each for N seconds from the committed seed corpus (fuzz/corpus/<target>/);
# exits non-zero on the first crash, leak, sanitizer report or invariant
# violation, leaving the input in build-fuzz/fuzz-artifacts/.
#
#   scripts/fuzz.sh                 # CI smoke: 30 s per target
#   scripts/fuzz.sh --seconds 600   # the longer run (README: Hostile input)
#
# Environment: FUZZ_BUILD_DIR (build-fuzz), JOBS (2, the build), FUZZ_JOBS
# (targets run at once: 2, or 1 on one CPU), CC/CXX (clang-14, clang++-14).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/fuzz.sh [--seconds N]   (N in [1, 86400], default 30)" >&2; }
seconds=30
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] || { usage; exit 2; }; seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage; exit 2 ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ] || [ "$seconds" -gt 86400 ]; then
  echo "fuzz.sh: --seconds must be a whole number in [1, 86400], got '$seconds'" >&2; exit 2
fi

BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
CC=${CC:-clang-14}
CXX=${CXX:-clang++-14}
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "fuzz.sh: $CXX not found; scripts/install-deps.sh installs clang-14 and libclang-rt-14-dev" >&2
  exit 1
fi
TARGETS=(payload_fuzz request_fuzz pull_answer_fuzz push_stream_fuzz pull_parts_fuzz checkpoint_fuzz)

CC=$CC CXX=$CXX cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLOCO_CUDA=OFF -DLOCO_FUZZ=ON -DLOCO_BUILD_TESTS=OFF -DLOCO_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target "${TARGETS[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$BUILD_DIR/fuzz-artifacts"

# fuzz_one TARGET: runs it for $seconds; its summary goes to
# fuzz-work/TARGET.summary, its log to fuzz-work/TARGET.log.
fuzz_one() {
  local t=$1 work="$BUILD_DIR/fuzz-work/$1" start
  # New inputs go to a scratch corpus; the committed seeds stay small.
  mkdir -p "$work"
  start=$(date +%s)
  if ! "$BUILD_DIR/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$BUILD_DIR/fuzz-artifacts/$t-" \
      "$work" "fuzz/corpus/$t" 2>"$BUILD_DIR/fuzz-work/$t.log"; then
    return 1
  fi
  {
    grep -E "^stat::number_of_executed_runs|^#[0-9]+.*DONE" "$BUILD_DIR/fuzz-work/$t.log" \
      | tail -n 2 || true
    echo "fuzz.sh: $t clean ($(( $(date +%s) - start ))s)"
  } > "$BUILD_DIR/fuzz-work/$t.summary"
}

# FUZZ_JOBS targets at a time (default: the CPU count, at most 2): each
# libFuzzer process runs on one core, so on two cores two targets take the
# wall time of one and each still gets its full $seconds.
jobs=${FUZZ_JOBS:-$(( $(nproc) < 2 ? 1 : 2 ))}
if ! [[ "$jobs" =~ ^[0-9]+$ ]] || [ "$jobs" -lt 1 ]; then
  echo "fuzz.sh: FUZZ_JOBS must be a whole number >= 1, got '$jobs'" >&2; exit 2
fi
mkdir -p "$BUILD_DIR/fuzz-work"
for ((i = 0; i < ${#TARGETS[@]}; i += jobs)); do
  batch=("${TARGETS[@]:i:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    echo "fuzz.sh: $t for ${seconds}s"
    rm -f "$BUILD_DIR/fuzz-work/$t.summary"
    fuzz_one "$t" & pids+=($!)
  done
  failed=()
  for k in "${!batch[@]}"; do
    if ! wait "${pids[$k]}"; then failed+=("${batch[$k]}"); fi
  done
  for t in "${batch[@]}"; do
    if [ -f "$BUILD_DIR/fuzz-work/$t.summary" ]; then cat "$BUILD_DIR/fuzz-work/$t.summary"; fi
  done
  for t in "${failed[@]}"; do
    tail -n 60 "$BUILD_DIR/fuzz-work/$t.log" >&2
    echo "fuzz.sh: $t FAILED; reproduce with $BUILD_DIR/bin/$t <artifact> (artifacts in $BUILD_DIR/fuzz-artifacts/)" >&2
  done
  [ ${#failed[@]} -eq 0 ] || exit 1
done
echo "fuzz.sh: all targets clean"
