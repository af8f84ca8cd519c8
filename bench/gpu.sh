#!/usr/bin/env bash
# Prepared GPU check for a machine with an NVIDIA H200 (or any sm_90 part):
# configures a CUDA build for sm_90, builds the kernels' parity test and
# benchmark, runs the CUDA parity tests and the CUDA kernel benchmarks, and
# writes everything to one folder. Runs unattended and finishes in a few
# minutes (every step has its own timeout; the whole is well under 10).
#
#   bench/gpu.sh [OUT_DIR]        # default ./gpu-out
#
# Needs what the project's build needs (CMake >= 3.25, Ninja, the CUDA
# toolkit, and the Debian packages named in the README: gRPC, Protobuf,
# prometheus-cpp, GoogleTest, Google Benchmark, OpenBLAS, zlib), because the
# top-level configure looks for all of them; only the kernel targets are
# built. Exit status: 0 when the build, the tests and the benchmarks all
# succeeded on a real device; 1 when any step failed; 2 when no CUDA device
# was visible (the tests would only have skipped).
#
# A machine without those packages can run binaries built elsewhere for
# sm_90: set LOCO_GPU_BIN_DIR to the folder that holds them (with their
# shared libraries on LD_LIBRARY_PATH); configure and build are then skipped.
#
# Output (OUT_DIR): machine.txt, configure.log, build.log,
# cuda_parity_test.log + .xml, device_encoder_test.log + .xml (LoCo
# compression on the device against the host), gpu_step_share.txt (what it
# adds to a GPU MLP step), group_nccl_test.log + .xml (the NCCL node-local
# group: one device, and two when present), mlp_cuda_test.log + .xml (the
# CUDA MLP against the CPU one), train_cuda.log and train_cpu.log with their
# log folders (200 LoCo-4 steps with --device cuda, then cpu),
# bench_cuda.txt + .json (the CUDA
# kernels against cudaMemcpy device-to-device), bench_cpu_quick.txt,
# summary.txt.
set -uo pipefail

out="${1:-./gpu-out}"
mkdir -p "$out" || exit 1
out="$(cd "$out" && pwd)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${LOCO_GPU_BUILD_DIR:-$root/build-gpu}"
jobs="$(nproc 2>/dev/null || echo 4)"
summary="$out/summary.txt"
: >"$summary"
status=0

step() {  # step NAME TIMEOUT_S LOG COMMAND...
  local name="$1" limit="$2" log="$3"
  shift 3
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  echo "$name: rc=$rc ($((SECONDS - t0)) s) log=$(basename "$log")" | tee -a "$summary"
  return "$rc"
}

{
  date -u
  nvidia-smi 2>&1 || echo "nvidia-smi failed"
  command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version || echo "nvcc not found"
  lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)'
  git -C "$root" rev-parse HEAD 2>/dev/null
  git -C "$root" status --short 2>/dev/null | head -50
} >"$out/machine.txt" 2>&1

if [[ -n "${LOCO_GPU_BIN_DIR:-}" ]]; then
  bin="$(cd "$LOCO_GPU_BIN_DIR" && pwd)"
  echo "prebuilt binaries from $bin: configure and build skipped" | tee -a "$summary"
else
  bin="$build/bin"
  nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  if ! step configure 300 "$out/configure.log" \
      cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCO_CUDA=ON \
        -DCMAKE_CUDA_COMPILER="$nvcc_path" -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLOCO_BUILD_TESTS=ON -DLOCO_BUILD_BENCH=ON; then
    echo "configure failed; see configure.log" | tee -a "$summary"
    exit 1
  fi
  if ! step build 420 "$out/build.log" \
      cmake --build "$build" --target cuda_parity_test loco-bench-kernels group_nccl_test \
        mlp_cuda_test device_encoder_test loco-bench-gpu-step loco-launch loco-coordinator \
        loco-server loco-worker -j "$jobs"; then
    echo "build failed; see build.log" | tee -a "$summary"
    exit 1
  fi
fi

step cuda_parity_test 180 "$out/cuda_parity_test.log" \
  "$bin/cuda_parity_test" --gtest_output="xml:$out/cuda_parity_test.xml" || status=1
if grep -q "no CUDA device" "$out/cuda_parity_test.log"; then
  echo "no CUDA device visible: the device tests skipped" | tee -a "$summary"
  status=2
fi

# The NCCL node-local group (worker/group/local_group_nccl.h) on the device(s),
# including one node in an in-process loopback cluster (a few seconds).
step group_nccl_test 120 "$out/group_nccl_test.log" \
  "$bin/group_nccl_test" --gtest_output="xml:$out/group_nccl_test.xml" || status=1

# The MLP on the device (models/mlp_cuda.h) against the CPU Mlp.
LOCO_BIN_DIR="$bin" step mlp_cuda_test 120 "$out/mlp_cuda_test.log" \
  "$bin/mlp_cuda_test" \
  --gtest_output="xml:$out/mlp_cuda_test.xml" || status=1

# The device-side gradient encoder against the host one, and a Worker fed
# device gradients against one fed host gradients (loopback servers).
step device_encoder_test 120 "$out/device_encoder_test.log" \
  "$bin/device_encoder_test" \
  --gtest_output="xml:$out/device_encoder_test.xml" || status=1

# What LoCo compression on the device adds to a GPU MLP step (11.9M
# parameters, batch 64, 2 shards); target <= 5 %.
step gpu_step_share 120 "$out/gpu_step_share.txt" \
  "$bin/loco-bench-gpu-step" --hidden 3072,3072 --batch 64 --shards 2 --reps 30 \
  || status=1

# A short training run on the GPU: 2 servers, 2 workers with --device cuda,
# LoCo-4, the demo MLP, 200 steps; then the same on the CPU, for the ratio.
for dev in cuda cpu; do
  step "train_$dev" 150 "$out/train_$dev.log" \
    "$bin/loco-launch" --servers 2 --workers 2 --steps 200 --hidden 1024,1024 \
    --progress plain --log-dir "$out/train_$dev" --worker-args "--device $dev --eval none" \
    || status=1
done

step bench_cuda 240 "$out/bench_cuda.txt" \
  "$bin/loco-bench-kernels" --benchmark_filter='^cuda/' \
  --benchmark_out="$out/bench_cuda.json" --benchmark_out_format=json || status=1
# The host side of the same machine, for scale (seconds).
step bench_cpu_quick 60 "$out/bench_cpu_quick.txt" \
  "$bin/loco-bench-kernels" --quick --benchmark_filter='^cpu/' || status=1

grep -E "PASSED|FAILED|SKIPPED \]" "$out/cuda_parity_test.log" | head -40 >>"$summary"
grep -E "PASSED|FAILED|SKIPPED \]" "$out/group_nccl_test.log" | head -20 >>"$summary"
grep -E "PASSED|FAILED|SKIPPED \]" "$out/mlp_cuda_test.log" | head -10 >>"$summary"
grep -E "PASSED|FAILED|SKIPPED \]" "$out/device_encoder_test.log" | head -10 >>"$summary"
grep -E "median|compress / step" "$out/gpu_step_share.txt" >>"$summary"
for dev in cuda cpu; do
  grep -hE "^finished|^step 200/" "$out/train_$dev.log" 2>/dev/null | tail -2 |
    sed "s/^/train_$dev: /" >>"$summary"
done
grep -E "^cuda/" "$out/bench_cuda.txt" >>"$summary"
echo "exit status $status" | tee -a "$summary"
exit "$status"
