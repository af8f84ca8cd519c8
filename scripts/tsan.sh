#!/usr/bin/env bash
# ThreadSanitizer over the code whose threads meet without gRPC: the
# server's state machines (ShardMachine, ShardStore, PayloadBuffers,
# AnswerSpares, PushAssembler, Membership, ...), common/ (ParallelFor, the
# lock-order checks) and the kernels. Builds them with -fsanitize=thread
# into build-tsan and runs them with every report fatal.
#
# Not the suites that talk over gRPC: Debian's gRPC is not instrumented, so
# TSan cannot see the synchronisation inside it and reports thousands of
# races on data that gRPC hands from one thread to the next (a full
# server_test run gave 6491). Suites join the list below once they are
# clean. Not in CI (the build alone takes about 3.5 minutes on 2 cores,
# and CI is already at 30); run it after changing code that threads share.
#
# Environment: TSAN_BUILD_DIR (build-tsan), JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
# server_test's suites that run without a gRPC server or channel.
SERVER_SUITES='Membership*:MembershipRecovery*:ShardLayout*:ReturnPathChunks*:ReturnPathParts*'
SERVER_SUITES+=':PullResponseWireBodies*:AnswerParts*:OwnedPayload*:PushAssembler*'
SERVER_SUITES+=':PayloadBuffers*:AnswerSpares*:ShardStoreTest*:ShardMachineTest*'
SERVER_SUITES+=':ShardMachineOptions*:StepHyperTest*:PushHyper*:EveryReturnCodec/*'
GEN=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD_DIR/Makefile" ]; then GEN=(-G Ninja); fi
# -O1 -g1 as in scripts/sanitize.sh: line tables name every frame of a
# report, and the build takes about half the time of -O2 -g.
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DLOCO_CUDA=OFF -DLOCO_SANITIZE=thread -DLOCO_BUILD_BENCH=OFF -DLOCO_BUILD_PYTHON=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target server_test common_test kernels_test

export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1}
run() {  # run NAME ARGS...
  local name=$1
  shift
  echo "tsan.sh: $name"
  local start
  start=$(date +%s)
  # No address-space randomisation: TSan's fixed shadow mapping can clash
  # with it on kernels that randomise more bits.
  setarch -R "$BUILD_DIR/bin/$name" --gtest_brief=1 "$@"
  echo "tsan.sh: $name clean ($(( $(date +%s) - start ))s)"
}
run kernels_test
run common_test
run server_test --gtest_filter="$SERVER_SUITES"
echo "tsan.sh: all clean"
