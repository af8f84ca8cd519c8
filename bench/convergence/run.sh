#!/usr/bin/env bash
# Convergence benchmark: trains the same model, with the same seed and data
# order, under every gradient codec (fp32, bf16, naive/ef/loco at 4 and 2
# bits) on a local cluster of W = 4 workers and S = 2 servers started by
# loco-launch, and writes per-step training loss and per-evaluation metrics
# as CSV, a PNG plot and a Markdown table (bench/README.md, "Convergence").
#
#   bench/convergence/run.sh [--quick] [--suite mlp|charlm|sweep|charlm-long|blocks|all]
#                            [--build-dir DIR] [--results DIR] [--no-readme]
#                            [--resume]
#
# --quick: a tiny character transformer, a few dozen steps per codec; fails
# (exit 1) unless every codec runs and its loss decreases (the CI smoke test,
# ctest -R convergence_quick). The full run is a benchmark, not a test.
# --resume: keep the runs whose results already exist (after an interrupted
# run); the tables are rebuilt from every run's CSVs.
# Knobs for the full run (environment): MLP_HIDDEN, MLP_EPOCHS, LM_STEPS,
# LM_BATCH, LM_LAYERS, LM_CHANNELS, LM_CONTEXT, LM_LR, LM_LONG_STEPS.
# --suite charlm-long (not part of "all"): the char LM trained LM_LONG_STEPS
# (default 1500) steps, past the early plateau that dominates 300-step runs,
# for the codecs the bars compare, each of the two bar codecs with a second
# seed.
# --suite blocks (not part of "all"): the demo MLP (784-1024-1024-10,
# 2 epochs) with LoCo-4 at 128- and 256-element blocks and with a 4-bit
# return delta, two seeds each, beside fp32: the evidence for the default
# block size and return bits.
set -euo pipefail

args="$*"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$root/build"
results=""
suite="all"
quick=0
readme=1
resume=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --suite) suite="$2"; shift ;;
    --suite=*) suite="${1#*=}" ;;
    --build-dir) build="$2"; shift ;;
    --build-dir=*) build="${1#*=}" ;;
    --results) results="$2"; shift ;;
    --results=*) results="${1#*=}" ;;
    --no-readme) readme=0 ;;
    --resume) resume=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$suite" in mlp|charlm|sweep|charlm-long|blocks|all) ;; *)
  echo "run.sh: --suite must be mlp, charlm, sweep, charlm-long, blocks or all, got '$suite'" >&2
  exit 2 ;;
esac
bin="$build/bin"
for b in loco-launch loco-coordinator loco-server loco-worker; do
  [ -x "$bin/$b" ] || { echo "run.sh: $bin/$b is missing; build it first (scripts/build.sh)" >&2; exit 2; }
done
py=python3
collect="$here/collect.py"
work="$(mktemp -d /tmp/loco-convergence.XXXXXX)"
trap 'rm -rf "$work"' EXIT
if [ "$quick" = 1 ]; then
  results="${results:-$work/results}"
  readme=0
else
  results="${results:-$here/results}"
fi
mkdir -p "$results"

CODECS=(fp32 bf16 naive-4 ef-4 loco-4 naive-2 ef-2 loco-2)

# train SUITE NAME CODEC BITS BLOCK "WORKER ARGS" "LAUNCH ARGS" [SEED]
train() {
  local suite_dir="$results/$1" name="$2" codec="$3" bits="$4" block="$5"
  local wargs="$6" largs="$7" seed="${8:-1}"
  if [ "$resume" = 1 ] && [ -f "$suite_dir/$name-eval.csv" ]; then
    echo "  $1/$name: kept (--resume)"
    return 0
  fi
  local trace="$work/trace/$1/$name"
  rm -rf "$trace"
  mkdir -p "$trace" "$suite_dir" "$work/logs/$1/$name"
  local t0=$SECONDS
  # The code width and block of the block codecs only: loco-launch refuses
  # them beside fp32 or bf16, which would ignore them.
  local quant=()
  case "$codec" in fp32|bf16) ;; *) quant=(--bits "$bits" --block-size "$block");; esac
  # shellcheck disable=SC2086
  if ! "$bin/loco-launch" --workers 4 --servers 2 --codec "$codec" "${quant[@]}" \
      --seed "$seed" --progress none --log-dir "$work/logs/$1/$name" \
      --timeout-s 1800 $largs --worker-args "--trace-dir=$trace --wait-for-workers=4 $wargs" \
      > "$work/logs/$1/$name/launch.out" 2>&1; then
    echo "run.sh: $1/$name failed; last lines of its output:" >&2
    tail -20 "$work/logs/$1/$name/launch.out" >&2
    tail -5 "$work/logs/$1/$name"/worker-0.log >&2 || true
    return 1
  fi
  "$py" "$collect" run "$trace" "$suite_dir/$name"
  echo "  $1/$name: $((SECONDS - t0)) s"
}

# codec_args NAME -> "codec bits"
codec_of() {
  case "$1" in
    fp32|bf16) echo "$1 4" ;;
    *-*) echo "${1%-*} ${1#*-}" ;;
  esac
}

plot() {  # plot SUITE YLABEL_EVAL RUN...
  local suite="$1" ylabel="$2"; shift 2
  command -v gnuplot >/dev/null || { echo "run.sh: gnuplot missing (Debian gnuplot-nox); no plot" >&2; return 0; }
  local train_plot="" eval_plot="" r
  for r in "$@"; do
    train_plot+="'$results/$suite/$r.csv' using 1:3 with lines title '$r', "
    eval_plot+="'$results/$suite/$r-eval.csv' using 1:4 with linespoints title '$r', "
  done
  gnuplot <<GP
set terminal pngcairo size 1200,500 noenhanced
set output '$results/$suite.png'
set datafile separator ','
set key autotitle columnhead
set multiplot layout 1,2 title '$suite: W=4 workers, S=2 servers'
set xlabel 'step'; set ylabel 'training loss (mean over workers, EMA 0.95)'
plot ${train_plot%, }
set ylabel '$ylabel'
plot ${eval_plot%, }
unset multiplot
GP
}

finish_table() {  # finish_table SUITE TITLE COMMAND RUN...
  local suite="$1" title="$2" cmd="$3"; shift 3
  local prefixes=() r
  for r in "$@"; do prefixes+=("$results/$suite/$r"); done
  {
    echo "Produced by \`$cmd\` on $(date -u +%Y-%m-%d); plot: \`bench/convergence/results/$suite.png\`."
    echo
    "$py" "$collect" table "$title" "${prefixes[@]}"
  } > "$results/$suite-table.md"
  cat "$results/$suite-table.md"
  if [ "$readme" = 1 ]; then
    "$py" "$collect" readme "$root/bench/README.md" "convergence:$suite" "$results/$suite-table.md"
  fi
}

if [ "$quick" = 1 ]; then
  lm="--model=charlm --lm-layers=1 --lm-channels=32 --lm-heads=2 --lm-context=32 --eval-windows=16 --eval-every=1000"
  runs=()
  for c in "${CODECS[@]}"; do
    read -r codec bits <<< "$(codec_of "$c")"
    train quick "$c" "$codec" "$bits" 128 "$lm" "--steps 40 --global-batch 16 --lr 3e-3"
    runs+=("$results/quick/$c")
  done
  "$py" "$collect" check "${runs[@]}"
  exit 0
fi

cmdline="bench/convergence/run.sh${args:+ $args}"
if [ "$suite" = mlp ] || [ "$suite" = all ]; then
  hidden="${MLP_HIDDEN:-1024,1024}" epochs="${MLP_EPOCHS:-2}"
  for c in "${CODECS[@]}"; do
    read -r codec bits <<< "$(codec_of "$c")"
    train mlp "$c" "$codec" "$bits" 128 "--model=mlp" \
      "--hidden $hidden --epochs $epochs --global-batch 256 --lr 1e-3"
  done
  # The noise floor: the same runs with other seeds (init and data order);
  # then LoCo-4 with 256-element blocks, the default, with two seeds.
  # NAME CODEC BITS SEED BLOCK
  MLP_EXTRA=("fp32-seed2 fp32 4 2 128" "fp32-seed3 fp32 4 3 128" "loco-4-seed2 loco 4 2 128"
             "loco-4-B256 loco 4 1 256" "loco-4-B256-seed2 loco 4 2 256")
  mlp_noise=()
  for n in "${MLP_EXTRA[@]}"; do
    read -r name codec bits seed block <<< "$n"
    train mlp "$name" "$codec" "$bits" "$block" "--model=mlp" \
      "--hidden $hidden --epochs $epochs --global-batch 256 --lr 1e-3" "$seed"
    mlp_noise+=("$name")
  done
  plot mlp "test loss" "${CODECS[@]}"
  finish_table mlp "MLP 784-$hidden-10, $epochs epochs" \
    "MLP_HIDDEN=$hidden MLP_EPOCHS=$epochs $cmdline" "${CODECS[@]}" "${mlp_noise[@]}"
fi

lm_steps="${LM_STEPS:-300}" lm_batch="${LM_BATCH:-16}" lm_lr="${LM_LR:-2e-3}"
lm="--model=charlm --lm-layers=${LM_LAYERS:-2} --lm-channels=${LM_CHANNELS:-128} --lm-heads=4 --lm-context=${LM_CONTEXT:-64} --eval-windows=256 --eval-every=$((lm_steps / 5))"
lm_launch="--steps $lm_steps --global-batch $lm_batch --lr $lm_lr"
lm_env="LM_STEPS=$lm_steps LM_BATCH=$lm_batch LM_LR=$lm_lr"
if [ "$suite" = charlm ] || [ "$suite" = all ]; then
  for c in "${CODECS[@]}"; do
    read -r codec bits <<< "$(codec_of "$c")"
    train charlm "$c" "$codec" "$bits" 128 "$lm" "$lm_launch"
  done
  # The noise floor: the same runs with other seeds (init and data order).
  NOISE=("fp32 fp32 4 2" "fp32 fp32 4 3" "loco-4 loco 4 2" "naive-4 naive 4 2")
  noise_runs=()
  for n in "${NOISE[@]}"; do
    read -r c codec bits seed <<< "$n"
    train charlm "$c-seed$seed" "$codec" "$bits" 128 "$lm" "$lm_launch" "$seed"
    noise_runs+=("$c-seed$seed")
  done
  plot charlm "validation loss" "${CODECS[@]}"
  finish_table charlm "char LM" "$lm_env $cmdline" "${CODECS[@]}" "${noise_runs[@]}"
fi

if [ "$suite" = sweep ] || [ "$suite" = all ]; then
  # LoCo 4-bit on the char LM: name beta reset_period block. Not a grid: β at
  # T_c = 0 and B = 128, then T_c and B around the β = 0.5 point. (T_c = 512
  # is not listed: with LM_STEPS = 300 it never fires and equals T_c = 0.)
  SWEEP=(
    "b0.0-tc0-B128 0.0 0 128"
    "b0.5-tc0-B128 0.5 0 128"
    "b0.8-tc0-B128 0.8 0 128"
    "b0.9-tc0-B128 0.9 0 128"
    "b0.5-tc64-B128 0.5 64 128"
    "b0.5-tc0-B64 0.5 0 64"
    "b0.5-tc0-B256 0.5 0 256"
  )
  names=(fp32)
  [ -f "$results/charlm/fp32.csv" ] || train charlm fp32 fp32 4 128 "$lm" "$lm_launch"
  mkdir -p "$results/sweep"
  cp "$results/charlm/fp32.csv" "$results/charlm/fp32-eval.csv" "$results/sweep/"
  for s in "${SWEEP[@]}"; do
    read -r name beta tc block <<< "$s"
    train sweep "$name" loco 4 "$block" "$lm --beta=$beta --reset-period=$tc" "$lm_launch"
    names+=("$name")
  done
  plot sweep "validation loss" "${names[@]}"
  finish_table sweep "LoCo-4 β / T_c / B (char LM)" "$lm_env $cmdline" "${names[@]}"
fi

if [ "$suite" = charlm-long ]; then
  long_steps="${LM_LONG_STEPS:-1500}"
  lm_long="${lm/--eval-every=$((lm_steps / 5))/--eval-every=$((long_steps / 5))}"
  long_launch="--steps $long_steps --global-batch $lm_batch --lr $lm_lr"
  # name codec bits seed; the bar codecs first, so that an interrupted run
  # (--resume continues it) has the rows that matter.
  LONG=(
    "fp32 fp32 4 1" "loco-4 loco 4 1" "naive-2 naive 2 1" "loco-2 loco 2 1"
    "fp32-seed2 fp32 4 2" "loco-4-seed2 loco 4 2" "naive-4 naive 4 1"
  )
  long_runs=()
  for n in "${LONG[@]}"; do
    read -r name codec bits seed <<< "$n"
    train charlm-long "$name" "$codec" "$bits" 128 "$lm_long" "$long_launch" "$seed"
    long_runs+=("$name")
  done
  plot charlm-long "validation loss" "${long_runs[@]}"
  finish_table charlm-long "char LM, $long_steps steps" \
    "LM_LONG_STEPS=$long_steps LM_BATCH=$lm_batch LM_LR=$lm_lr $cmdline" "${long_runs[@]}"
fi

if [ "$suite" = blocks ]; then
  mlp_launch="--hidden 1024,1024 --epochs 2 --global-batch 256 --lr 1e-3"
  # name codec block seed "launch args"; seed 1 first (--resume continues).
  BLOCKS=(
    "fp32 fp32 256 1" "loco-4-B128 loco 128 1" "loco-4-B256 loco 256 1"
    "loco-4-B256-pull4 loco 256 1 --server-args=--pull-bits=4"
    "fp32-seed2 fp32 256 2" "loco-4-B128-seed2 loco 128 2" "loco-4-B256-seed2 loco 256 2"
    "loco-4-B256-pull4-seed2 loco 256 2 --server-args=--pull-bits=4"
  )
  block_runs=()
  for n in "${BLOCKS[@]}"; do
    read -r name codec block seed extra <<< "$n"
    train blocks "$name" "$codec" 4 "$block" "--model=mlp" "$mlp_launch ${extra:-}" "$seed"
    block_runs+=("$name")
  done
  plot blocks "test loss" "${block_runs[@]}"
  finish_table blocks "MLP 784-1024,1024-10, 2 epochs" "$cmdline" "${block_runs[@]}"
fi
