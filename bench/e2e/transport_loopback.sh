#!/usr/bin/env bash
# The transport probe without namespaces or shaping: a coordinator, S
# loco-servers and W probes (loco-bench-e2e-transport, one per worker) on
# 127.0.0.1, all pushing every shard at once. Each probe's payload
# throughput is what one worker's link would have to carry; against a
# link rate it says whether the CPU path (gRPC, the server's handling,
# the kernel's TCP) can fill that link when W workers push together, on a
# machine with cores for them. No root needed; the shaped measurement is
# bench/e2e/run.sh --transport --transport-workers W --transport-servers S.
#
#   bench/e2e/transport_loopback.sh [--bin-dir DIR] [--workers W] [--servers S]
#       [--elements N] [--pushes K] [--link-mbit R] [--out DIR]
#
# Defaults: build/bin, W=4, S=2, N=12582912 (>= 10M parameters), K=100,
# R=10000. Output: one JSON line per probe in OUT/probe<i>.json, and a
# summary line per probe and for the median probe on stdout:
#   transport-loopback W=4 S=2: probe i: X Mbit/s = F of a R Mbit/s link
# Every process is bounded (timeout) and killed on exit. Exit 0 when every
# probe succeeded, 1 otherwise, 2 for bad flags.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/build/bin" workers=4 servers=2 elements=12582912 pushes=100 link=10000
usage() { sed -n '2,20p' "$0"; }
int_in() {  # int_in FLAG VALUE LO HI
  if ! [[ "$2" =~ ^[0-9]+$ ]] || (( $2 < $3 || $2 > $4 )); then
    echo "transport_loopback: invalid value '$2' for $1: expected an integer in [$3, $4]" >&2
    exit 2
  fi
}
while (( $# )); do
  case "$1" in -h|--help) usage; exit 0 ;; esac
  [[ $# -ge 2 ]] || { echo "transport_loopback: $1 needs a value (see --help)" >&2; exit 2; }
  case "$1" in
    --bin-dir) bin="$2" ;;
    --workers) int_in "$1" "$2" 1 64; workers="$2" ;;
    --servers) int_in "$1" "$2" 1 16; servers="$2" ;;
    --elements) int_in "$1" "$2" 4096 1073741824; elements="$2" ;;
    --pushes) int_in "$1" "$2" 5 100000; pushes="$2" ;;
    --link-mbit) int_in "$1" "$2" 10 1000000; link="$2" ;;
    --out) out="$2"; mkdir -p "$out" || exit 2 ;;
    *) echo "transport_loopback: unknown flag '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
for b in loco-coordinator loco-server loco-bench-e2e-transport; do
  [[ -x "$bin/$b" ]] || { echo "transport_loopback: $bin/$b not found (--bin-dir)" >&2; exit 2; }
done

# Every service listens on a port the kernel picks (--port 0), so that
# nothing guessed can collide with another run's; the coordinator's is read
# from its "LISTENING host:port" line.
limit=300
out="$(mktemp -d /tmp/loco-transport.XXXXXX)"
pids=()
# Each pid is a `timeout` wrapper: kill its child, then it.
cleanup() {
  { for p in "${pids[@]}"; do pkill -9 -P "$p"; kill -9 "$p"; done; wait; } 2>/dev/null
  rm -rf "$out"  # a failure has printed what it needs from the logs
}
trap cleanup EXIT
# Plaintext on loopback, for binaries built with TLS support. (The help is
# read whole: grep -q closing the pipe early would fail it under pipefail.)
insecure() {
  local help
  help="$("$1" --help 2>&1)"
  [[ "$help" == *--insecure* ]] && echo --insecure
}

timeout -k 5 "$limit" "$bin/loco-coordinator" --host 127.0.0.1 --port 0 \
  --num-servers "$servers" --heartbeat-timeout-ms 600000 $(insecure "$bin/loco-coordinator") \
  >"$out/coordinator.log" 2>&1 &
pids+=($!)
coordinator=""
for (( t = 0; t < 300; ++t )); do  # at most 30 s
  coordinator="$(sed -n 's/^LISTENING //p' "$out/coordinator.log" 2>/dev/null | head -n 1)"
  [[ -n "$coordinator" ]] && break
  if ! kill -0 "${pids[0]}" 2>/dev/null; then
    echo "transport_loopback: the coordinator exited before listening:" >&2
    tail -n 5 "$out/coordinator.log" >&2
    exit 1
  fi
  sleep 0.1
done
[[ -n "$coordinator" ]] || { echo "transport_loopback: the coordinator did not listen within 30 s" >&2; exit 1; }
coord_port="${coordinator##*:}"
for (( k = 0; k < servers; ++k )); do
  timeout -k 5 "$limit" "$bin/loco-server" --host 127.0.0.1 --port 0 \
    --shard-id "$k" --coordinator "127.0.0.1:$coord_port" $(insecure "$bin/loco-server") \
    >"$out/server$k.log" 2>&1 &
  pids+=($!)
done
all_shards=()
(( servers > 1 )) && all_shards=(--all-shards)
probes=()
for (( i = 0; i < workers; ++i )); do
  timeout -k 5 "$limit" "$bin/loco-bench-e2e-transport" --coordinator "127.0.0.1:$coord_port" \
    --elements "$elements" --pushes "$pushes" --timeout-ms $(( limit * 1000 )) \
    --probes "$workers" --seed $(( i + 1 )) "${all_shards[@]}" \
    >"$out/probe$i.json" 2>"$out/probe$i.log" &
  probes+=($!)
  pids+=($!)
done
# Until every probe has finished: a coordinator or server that exits first
# (a port taken, a bad flag) fails the run at once with its log.
services=("${pids[@]:0:$(( servers + 1 ))}")
names=(coordinator)
for (( k = 0; k < servers; ++k )); do names+=("server$k"); done
for (( t = 0; t < limit * 10; ++t )); do
  running=0
  for p in "${probes[@]}"; do kill -0 "$p" 2>/dev/null && running=1; done
  (( running )) || break
  for j in "${!services[@]}"; do
    if ! kill -0 "${services[$j]}" 2>/dev/null; then
      echo "transport_loopback: the ${names[$j]} exited before the probes finished:" >&2
      tail -n 5 "$out/${names[$j]}.log" >&2
      exit 1
    fi
  done
  sleep 0.1
done
status=0
for (( i = 0; i < workers; ++i )); do
  if ! wait "${probes[$i]}"; then
    echo "transport_loopback: probe $i failed:" >&2
    tail -5 "$out/probe$i.log" >&2
    status=1
  fi
done
(( status == 0 )) || exit 1
/usr/bin/python3 - "$out" "$workers" "$servers" "$link" <<'EOF'
import json, statistics, sys
out, workers, servers, link = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rates = []
for i in range(workers):
    with open(f"{out}/probe{i}.json") as f:
        e = [json.loads(l) for l in f if l.startswith("{")][-1]
    mbit = e["bytes_per_s"] * 8 / 1e6
    rates.append(mbit)
    print(f"transport-loopback W={workers} S={servers}: probe {i}: {mbit:.0f} Mbit/s = "
          f"{mbit / link:.3f} of a {link} Mbit/s link ({e['request_bytes'] / 1e6:.2f} MB "
          f"per round, median round {e['median_s'] * 1e3:.2f} ms)")
m = statistics.median(rates)
print(f"transport-loopback W={workers} S={servers}: median probe {m:.0f} Mbit/s = "
      f"{m / link:.3f} of {link} Mbit/s; lowest {min(rates) / link:.3f}; "
      f"all probes together {sum(rates):.0f} Mbit/s")
EOF
